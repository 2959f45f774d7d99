"""Arrow schemas of every pairank table, defined once.

Every table that crosses a storage boundary has a schema here. A table read from
outside is checked against it by :func:`pairank.storage.validation.validate`, which
names the source, the row and the column of the first bad value::

    >>> import pyarrow as pa
    >>> from pairank.storage.validation import validate
    >>> t = pa.table({"candidate_id": ["c1"], "aspect": ["coherence"], "score": [7.0]})
    >>> validate(t, HUMAN_SCORES, "scores.parquet").num_rows
    1
"""

from __future__ import annotations

import pyarrow as pa

#: The verdict labels a judgment may carry. A verdict is ``p_a`` plus one of these.
LABELS = ("A", "B", "tie")


def column(name: str, type_: pa.DataType, doc: str, nullable: bool = False) -> pa.Field:
    """A column of a schema with its description, kept in the field's metadata (the stored tables carry it)."""
    return pa.field(name, type_, nullable=nullable, metadata={"description": doc})


CANDIDATES = pa.schema(
    [
        column(
            "context_id", pa.string(), "Identifier of the input (document, dialogue, prompt) the candidate answers."
        ),
        column("context", pa.string(), "The input text shown to the judge before the candidates."),
        column("candidate_id", pa.string(), "Identifier of the candidate, unique in the table."),
        column("system", pa.string(), "Name of the system (model, writer) that produced the candidate."),
        column("text", pa.string(), "The candidate text."),
    ]
)


#: CANDIDATES' optional column: a table may carry it (after the schema's columns) or not.
CATEGORY = column(
    "category",
    pa.string(),
    "Category of the context (a task type, a domain); the same for every candidate of a context. "
    "`pairank leaderboard` adds one leaderboard per category. Null: the context has none.",
    nullable=True,
)


#: CANDIDATES' optional column: the context as a conversation (a system prompt, earlier turns).
CONVERSATION = column(
    "conversation",
    pa.string(),
    "The context as a conversation: JSON of a list of messages {role: system|user|assistant, content: text} that "
    "ends with a user message (storage.conversations); the same for every candidate of a context. `context` holds "
    "its transcript, and prompts show the messages turn by turn. Null: the context is one user message.",
    nullable=True,
)

#: CANDIDATES' optional column: the candidate's own replies to the conversation's earlier user turns.
PRIOR_REPLIES = column(
    "prior_replies",
    pa.string(),
    "JSON list of the candidate's own replies to the conversation's earlier user turns, one per turn before the "
    "last (MT-Bench's second turn: the model's first answer); `text` is its reply to the last. Null: none.",
    nullable=True,
)

#: CANDIDATES' optional column: a reference answer of the context.
REFERENCE = column(
    "reference",
    pa.string(),
    "A reference answer to the context (MT-Bench's math and reasoning questions), shown to the judge after the "
    "context; the same for every candidate of a context. Null: none.",
    nullable=True,
)

#: CANDIDATES' optional columns, in the order a table carries them (after the schema's own).
CANDIDATE_OPTIONAL = (CATEGORY, CONVERSATION, PRIOR_REPLIES, REFERENCE)


STYLE_FEATURES = pa.schema(
    [
        column("candidate_id", pa.string(), "Candidate the counts are of."),
        column(
            "length",
            pa.float64(),
            "Its length as the source counts it (tokens in LMArena's and Arena-Hard's metadata; characters when "
            "counted from the text).",
        ),
        column("headers", pa.float64(), "Markdown headers (h1 to h6)."),
        column("bold", pa.float64(), "Bold spans (** and __)."),
        column("lists", pa.float64(), "List items (ordered and unordered)."),
    ]
)


HUMAN_SCORES = pa.schema(
    [
        column("candidate_id", pa.string(), "Candidate the score belongs to."),
        column("aspect", pa.string(), "Aspect scored, e.g. coherence."),
        column("score", pa.float64(), "Human score (the mean over annotators where there are several)."),
    ]
)


PAIRWISE_LABELS = pa.schema(
    [
        column("context_id", pa.string(), "Input both candidates answer."),
        column("candidate_a", pa.string(), "First candidate of the pair."),
        column("candidate_b", pa.string(), "Second candidate of the pair."),
        column("preferred", pa.string(), "Human verdict: 'A' (candidate_a is better), 'B' or 'tie'."),
    ]
)


REQUESTS = pa.schema(
    [
        column("key", pa.string(), "Stable hash of everything that determines the judgment (see storage.keys)."),
        column("context_id", pa.string(), "Input both candidates answer."),
        column("aspect", pa.string(), "Aspect the judge compares."),
        column("candidate_a", pa.string(), "Candidate shown in slot A."),
        column("candidate_b", pa.string(), "Candidate shown in slot B."),
        column("prompt", pa.string(), "The rendered judge prompt."),
        column("prompt_hash", pa.string(), "Hash of the prompt template the prompt was rendered from."),
    ]
)


JUDGMENTS = pa.schema(
    [
        column("key", pa.string(), "Stable hash of everything that determines the judgment."),
        column("engine", pa.string(), "Judge engine: vllm, http, replay."),
        column("model", pa.string(), "Judge model name or path."),
        column("revision", pa.string(), "Model revision (a commit or a content hash of the weights folder)."),
        column("prompt_hash", pa.string(), "Hash of the prompt template."),
        column("sampling", pa.string(), "Sampling settings as canonical JSON."),
        column("context_id", pa.string(), "Input both candidates answer."),
        column("aspect", pa.string(), "Aspect compared."),
        column("candidate_a", pa.string(), "Candidate in slot A."),
        column("candidate_b", pa.string(), "Candidate in slot B."),
        column("p_a", pa.float64(), "P(A) / (P(A) + P(B)) at the answer position; null on error.", nullable=True),
        column("logprob_a", pa.float64(), "Log-probability of label A (all its surface forms).", nullable=True),
        column("logprob_b", pa.float64(), "Log-probability of label B (all its surface forms).", nullable=True),
        column("label", pa.string(), "Parsed verdict: 'A', 'B' or 'tie'; null on error.", nullable=True),
        column("raw_text", pa.string(), "Generated text, where the judge generated any.", nullable=True),
        column("input_tokens", pa.int64(), "Prompt tokens."),
        column("output_tokens", pa.int64(), "Generated tokens."),
        column("seconds", pa.float64(), "Engine seconds attributed to this judgment."),
        column("error", pa.string(), "Why no verdict was produced; null when it was.", nullable=True),
        column("created_at", pa.timestamp("us", tz="UTC"), "When the judgment was made."),
    ]
)


PASS_REQUESTS = pa.schema(
    [
        column("key", pa.string(), "Stable hash of everything that determines the pass's outcome."),
        column("context_id", pa.string(), "Input the output answers."),
        column("aspect", pa.string(), "Aspect the pass is about."),
        column("kind", pa.string(), "analysis (PRePair), analysis_pairwise (PRePair^) or score (pointwise)."),
        column("candidate_id", pa.string(), "The output analysed or scored."),
        column("other_id", pa.string(), "analysis_pairwise: the other output shown; '' otherwise."),
        column("focus", pa.string(), "analysis_pairwise: the slot (A or B) of the analysed output; '' otherwise."),
        column("prompt", pa.string(), "The rendered prompt."),
        column("prompt_hash", pa.string(), "Hash of the template the prompt was rendered from."),
    ]
)


PASSES = pa.schema(
    [
        column("key", pa.string(), "Stable hash of everything that determines the pass's outcome."),
        column("engine", pa.string(), "Judge engine."),
        column("model", pa.string(), "Judge model name or path."),
        column("revision", pa.string(), "Model revision."),
        column("prompt_hash", pa.string(), "Hash of the template."),
        column("sampling", pa.string(), "Settings of the pass as canonical JSON."),
        column("context_id", pa.string(), "Input the output answers."),
        column("aspect", pa.string(), "Aspect the pass is about."),
        column("kind", pa.string(), "analysis (PRePair), analysis_pairwise (PRePair^) or score (pointwise)."),
        column("candidate_id", pa.string(), "The output analysed or scored."),
        column("other_id", pa.string(), "analysis_pairwise: the other output shown; '' otherwise."),
        column("focus", pa.string(), "analysis_pairwise: the slot (A or B) of the analysed output; '' otherwise."),
        column("text", pa.string(), "The generated analysis, or the score distribution as JSON.", nullable=True),
        column("score", pa.float64(), "score: the probability-weighted mean score; null otherwise.", nullable=True),
        column("input_tokens", pa.int64(), "Prompt tokens."),
        column("output_tokens", pa.int64(), "Generated tokens."),
        column("seconds", pa.float64(), "Engine seconds attributed to this pass."),
        column("error", pa.string(), "Why the pass produced nothing usable; null when it did.", nullable=True),
        column("created_at", pa.timestamp("us", tz="UTC"), "When the pass was made."),
    ]
)


#: The kinds of a pass row.
PASS_KINDS = ("analysis", "analysis_pairwise", "score")


RANKINGS = pa.schema(
    [
        column("context_id", pa.string(), "Input the candidates answer."),
        column("aspect", pa.string(), "Aspect ranked."),
        column("candidate_id", pa.string(), "Ranked candidate."),
        column("system", pa.string(), "System that produced the candidate."),
        column("method", pa.string(), "Scoring method, e.g. win_ratio_hard."),
        column("score", pa.float64(), "Score under the method (higher is better)."),
        column("rank", pa.int64(), "1 is best; ties share the smallest rank."),
        column("n_comparisons", pa.int64(), "Comparisons that involved the candidate."),
    ]
)


SPEARMAN = pa.schema(
    [
        column("aspect", pa.string(), "Aspect compared with human scores."),
        column("method", pa.string(), "Scoring method."),
        column("level", pa.string(), "'sample' (per context, averaged) or 'dataset' (all candidates pooled)."),
        column("rho", pa.float64(), "Spearman correlation with the human scores.", nullable=True),
        column("ci_low", pa.float64(), "Lower end of the 95% bootstrap interval.", nullable=True),
        column("ci_high", pa.float64(), "Upper end of the 95% bootstrap interval.", nullable=True),
        column("n", pa.int64(), "Contexts (sample level) or candidates (dataset level) used."),
    ]
)


POSITION_BIAS = pa.schema(
    [
        column("aspect", pa.string(), "Aspect judged."),
        column("n", pa.int64(), "Judgments with a verdict."),
        column(
            "slot_a_win_fraction", pa.float64(), "Fraction of judgments won by the candidate in slot A.", nullable=True
        ),
        column("mean_p_a", pa.float64(), "Mean p_a over the judgments.", nullable=True),
    ]
)


WINRATES = pa.schema(
    [
        column("aspect", pa.string(), "Aspect judged."),
        column("system", pa.string(), "System whose win rate against the baseline is estimated."),
        column("baseline", pa.string(), "Baseline system."),
        column("method", pa.string(), "human, observed, bwrs, dawid_skene or dawid_skene_em (see operators.winrate)."),
        column("prior", pa.string(), "Accuracy prior: none, in_dist or ood ('' where the method has none)."),
        column("judge", pa.string(), "Judge the row is about, or '*' for all judges pooled."),
        column("estimate", pa.float64(), "Posterior mean (point estimate for EM); null when refused.", nullable=True),
        column("mode", pa.float64(), "Posterior mode (KDE of the draws for sampled methods).", nullable=True),
        column("ci_low", pa.float64(), "Lower end of the credible interval.", nullable=True),
        column("ci_high", pa.float64(), "Upper end of the credible interval.", nullable=True),
        column("mass", pa.float64(), "Probability mass of the credible interval."),
        column("n_pairs", pa.int64(), "Pairs (contexts with both systems) with at least one vote or label."),
        column("n_judges", pa.int64(), "Judges whose votes went into the row."),
        column("n_gold", pa.int64(), "Human-labelled pairs the method used (accuracies or observed latent labels)."),
        column("n_ties", pa.int64(), "Tied swap-and-sum votes broken by the seeded coin."),
        column("draws_kept", pa.int64(), "BWRS: draws kept; sampled methods: posterior draws.", nullable=True),
        column("draws_dropped", pa.int64(), "BWRS: draws dropped (below chance or outside (0, 1)).", nullable=True),
        column("rhat", pa.float64(), "Dawid-Skene: worst split R-hat.", nullable=True),
        column("ess_bulk", pa.float64(), "Dawid-Skene: smallest bulk effective sample size.", nullable=True),
        column("status", pa.string(), "'ok', or why no estimate (or a caveat) is given."),
    ]
)


WINRATE_JUDGES = pa.schema(
    [
        column("aspect", pa.string(), "Aspect judged."),
        column("system", pa.string(), "System compared with the baseline."),
        column("baseline", pa.string(), "Baseline system."),
        column("judge", pa.string(), "Judge name (model/mode or model@prompt)."),
        column("n_votes", pa.int64(), "Pairs the judge voted on."),
        column("n_ties", pa.int64(), "Tied votes broken by the coin."),
        column("k", pa.float64(), "Observed win rate of the system: votes for it / votes.", nullable=True),
        column("q0", pa.float64(), "Agreement on pairs the system truly wins (human labels used).", nullable=True),
        column("q1", pa.float64(), "Agreement on pairs the baseline truly wins (human labels used).", nullable=True),
        column("n_q0", pa.int64(), "Labelled pairs behind q0."),
        column("n_q1", pa.int64(), "Labelled pairs behind q1."),
        column("ds_q0", pa.float64(), "Dawid-Skene posterior mean of q0.", nullable=True),
        column("ds_q1", pa.float64(), "Dawid-Skene posterior mean of q1.", nullable=True),
        column("below_chance", pa.bool_(), "q0 + q1 < 1 (labels, else Dawid-Skene): reported, never inverted."),
    ]
)


META_EVAL = pa.schema(
    [
        column("subset", pa.string(), "Context id up to its last '/' (LLMBar/Natural); '' for bare ids (one subset)."),
        column("aspect", pa.string(), "Aspect judged."),
        column("judge", pa.string(), "Judge name (model/mode or model@prompt; see operators.votes.judge_name)."),
        column("engine", pa.string(), "Judge identity: engine."),
        column("model", pa.string(), "Judge identity: model."),
        column("revision", pa.string(), "Judge identity: model revision."),
        column("prompt_hash", pa.string(), "Judge identity: prompt template hash."),
        column("sampling", pa.string(), "Judge identity: sampling settings as canonical JSON."),
        column("n_pairs", pa.int64(), "Labelled A/B pairs the judge judged in either order, error rows included."),
        column("n_original", pa.int64(), "Of these, pairs judged in the labelled order (error rows included)."),
        column("n_swapped", pa.int64(), "Of these, pairs judged in the swapped order (error rows included)."),
        column("n_correct_False", pa.int64(), "Pairs right in the original order.", nullable=True),
        column("n_correct_True", pa.int64(), "Pairs right in the swapped order.", nullable=True),
        column("n_correct_both", pa.int64(), "Pairs right in both orders.", nullable=True),
        column("n_equal", pa.int64(), "Pairs whose orders pick the same output (two no-verdicts too).", nullable=True),
        column("correct_False", pa.string(), "Accuracy in the original order: 'n / total = x%'.", nullable=True),
        column("correct_True", pa.string(), "Accuracy in the swapped order: 'n / total = x%'.", nullable=True),
        column("correct_average", pa.string(), "Mean of the two accuracies: 'x%'.", nullable=True),
        column("correct_both", pa.string(), "Right in both orders: 'n / total = x%'.", nullable=True),
        column("equal", pa.string(), "Positional agreement (n_equal): 'n / total = x%'.", nullable=True),
        column(
            "kappa_False",
            pa.float64(),
            "LLMBar's kappa of the original order: Cohen's kappa of (picks output 1 ? 1 : 0) against the label "
            "(1 or 2), so only 'both say 1' agrees; not the usual verdict-vs-label kappa. Null where undefined.",
            nullable=True,
        ),
        column("kappa_True", pa.float64(), "The same for the swapped order.", nullable=True),
        column("kappa_average", pa.float64(), "(kappa_False + kappa_True) / 2.", nullable=True),
        column(
            "kappa_agreement",
            pa.float64(),
            "Cohen's kappa between the two orders' 'picks output 1' (a missing verdict counts as not 1).",
            nullable=True,
        ),
    ]
)


#: LEADERBOARD's style-controlled columns (added after the first boards: see :func:`later_fields`).
STYLE_COLUMNS = [
    column(
        "style_strength",
        pa.float64(),
        "Style-controlled Bradley-Terry strength (length and markdown held equal; operators.style_control), "
        "centred to mean 0; null where not identified or without candidate texts.",
        nullable=True,
    ),
    column(
        "style_low",
        pa.float64(),
        "Lower end of its 95% interval: with n_boot > 0 the bootstrap percentile interval over contexts resampled "
        "with replacement (compat lmarena: over battles), with n_boot 0 the Wald interval of the fit (compat "
        "lmarena: arena-rank's sandwich interval); leaderboard.json's `intervals` names it.",
        nullable=True,
    ),
    column("style_high", pa.float64(), "Upper end of that interval.", nullable=True),
    column("style_rank", pa.int64(), "Rank by style-controlled strength (1 is best).", nullable=True),
    column(
        "lc_win_rate",
        pa.float64(),
        "Length-controlled win rate against the baseline, per aspect: by default pairank's fit over all systems "
        "(a strength each; the judge's tanh of the length difference and slot term shared; "
        "operators.style_control) at equal length, slots balanced; under compat alpaca-eval AlpacaEval 2's GLM "
        "(operators.compat).",
        nullable=True,
    ),
    column(
        "lc_low",
        pa.float64(),
        "Lower end of its 95% interval: Wald's by default; under compat alpaca-eval the LC win rate -/+ 1.96 of "
        "AlpacaEval's standard error. No bootstrap.",
        nullable=True,
    ),
    column("lc_high", pa.float64(), "Upper end of that interval.", nullable=True),
    column(
        "style_status",
        pa.string(),
        "'ok', or why the style-controlled columns are null (not identified, no candidate texts).",
        nullable=True,
    ),
]


LEADERBOARD = pa.schema(
    [
        column("aspect", pa.string(), "Aspect ranked, or 'overall' (every aspect's judgments pooled)."),
        column("system", pa.string(), "System ranked."),
        column("rank", pa.int64(), "1 is best, by strength; equal strengths share the smallest rank."),
        column(
            "strength",
            pa.float64(),
            "Bradley-Terry log-strength theta, centred to mean 0 over the aspect's systems: P(x beats y) = "
            "1 / (1 + exp(theta_y - theta_x)); with the virtual-tie prior, or under compat lmarena arena-rank's "
            "maximum likelihood without one.",
        ),
        column(
            "strength_low",
            pa.float64(),
            "Lower end of its interval at `mass`: the bootstrap percentile interval over contexts resampled with "
            "replacement (compat lmarena: over battles; with n_boot 0 arena-rank's sandwich interval, else null); "
            "leaderboard.json's `intervals` names it.",
            nullable=True,
        ),
        column("strength_high", pa.float64(), "Upper end of that interval.", nullable=True),
        column("elo", pa.float64(), "Strength on an Elo-like scale: 1000 + 400 / ln(10) * strength (mean 1000)."),
        column("elo_low", pa.float64(), "strength_low on the Elo-like scale.", nullable=True),
        column("elo_high", pa.float64(), "strength_high on the Elo-like scale.", nullable=True),
        column("mass", pa.float64(), "Probability mass of the strength intervals."),
        column(
            "n_boot",
            pa.int64(),
            "Bootstrap refits (resampled contexts; compat lmarena: battles) in which the system was compared.",
        ),
        column("win_ratio", pa.float64(), "Hard win ratio: (wins + ties / 2) / n_judgments."),
        column("n_judgments", pa.int64(), "Judgments with a verdict involving the system: the comparisons behind it."),
        column("n_wins", pa.int64(), "Of these, judgments the system won."),
        column("n_losses", pa.int64(), "Of these, judgments the system lost."),
        column("n_ties", pa.int64(), "Of these, tied judgments (half a win to each side)."),
        column("n_errors", pa.int64(), "Error rows (no verdict) that involve the system: skipped, counted here."),
        column("n_contexts", pa.int64(), "Contexts (inputs) in which the system has a judgment with a verdict."),
        column("n_opponents", pa.int64(), "Distinct other systems the system was compared with."),
        column("n_judges", pa.int64(), "Distinct judge identities (engine, model, revision, prompt, sampling)."),
        column("judges", pa.list_(pa.string()), "Their names (operators.votes.judge_names)."),
        column("winrate_baseline", pa.string(), "Baseline of the carried win rate; null without one.", nullable=True),
        column(
            "winrate_method",
            pa.string(),
            "Win-rate method carried (first with an estimate of dawid_skene, bwrs, observed by default); null if none.",
            nullable=True,
        ),
        column("winrate_prior", pa.string(), "Accuracy prior of the carried win rate.", nullable=True),
        column("winrate_estimate", pa.float64(), "Win rate against the baseline (from WINRATES).", nullable=True),
        column("winrate_low", pa.float64(), "Lower end of its credible interval.", nullable=True),
        column("winrate_high", pa.float64(), "Upper end of its credible interval.", nullable=True),
        column("winrate_mass", pa.float64(), "Mass of that interval.", nullable=True),
        column("winrate_n_pairs", pa.int64(), "Pairs behind the win rate.", nullable=True),
        column("winrate_n_judges", pa.int64(), "Judges behind the win rate.", nullable=True),
        column(
            "winrate_status",
            pa.string(),
            "'ok', 'baseline' for the baseline itself, or why no win rate is carried; null without win rates.",
            nullable=True,
        ),
        *STYLE_COLUMNS,
    ]
)


PREDICTION_POWERED = pa.schema(
    [
        column("system", pa.string(), "System ranked."),
        column(
            "rank", pa.int64(), "1 is best, by prediction-powered win rate; null without human labels.", nullable=True
        ),
        column(
            "win_rate",
            pa.float64(),
            "Prediction-powered win rate: P(humans prefer the system) in a judged (context, pair) involving it, the "
            "judge's estimate on every judged key corrected by the human-minus-judge gap on the labelled ones "
            "(PPI++); null where no labelled key involves it.",
            nullable=True,
        ),
        column("win_low", pa.float64(), "Lower end of its marginal interval at 1 - alpha.", nullable=True),
        column("win_high", pa.float64(), "Upper end of that interval.", nullable=True),
        column("rank_low", pa.int64(), "Best rank of its prediction-powered rank-set at 1 - alpha (simultaneous)."),
        column("rank_high", pa.int64(), "Worst rank of that rank-set."),
        column("judge_win_rate", pa.float64(), "The judge's own win rate on the judged keys.", nullable=True),
        column(
            "judge_low", pa.float64(), "Lower end of its bootstrap percentile interval at 1 - alpha.", nullable=True
        ),
        column("judge_high", pa.float64(), "Upper end of that interval.", nullable=True),
        column("judge_rank_low", pa.int64(), "Best rank the judge-only intervals allow.", nullable=True),
        column("judge_rank_high", pa.int64(), "Worst rank the judge-only intervals allow.", nullable=True),
        column(
            "rectifier",
            pa.float64(),
            "Mean human minus judge win probability on its labelled keys (> 0: the judge under-rates it).",
            nullable=True,
        ),
        column(
            "power", pa.float64(), "PPI++'s lambda in [0, 1] (1: plain PPI, 0: the human labels alone).", nullable=True
        ),
        column("n_judged", pa.int64(), "Judged (context, system pair) keys involving it."),
        column("n_human", pa.int64(), "Of these, keys with a human label."),
        column("alpha", pa.float64(), "Error level: rank-sets and intervals are at 1 - alpha."),
    ]
)


NIGHTLY_STATE = pa.schema(
    [
        column("aspect", pa.string(), "Aspect ranked."),
        column("context_id", pa.string(), "Input the candidate answers."),
        column("candidate_id", pa.string(), "Placed candidate."),
        column("system", pa.string(), "System that produced it."),
        column("role", pa.string(), "'anchor' (sorted by PAIRS when the context first came) or 'inserted'."),
        column("anchor_index", pa.int64(), "anchor: its place among the sorted anchors (0 is best).", nullable=True),
        column("gap", pa.int64(), "inserted: how many anchors rank above it.", nullable=True),
        column("mean_p", pa.float64(), "inserted: mean P(it beats the anchor) over its probes.", nullable=True),
        column("order", pa.int64(), "Its place in the context's seeded order (the within-gap tie-break)."),
        column("rank", pa.int64(), "Its place in the context's ranking (1 is best)."),
        column("night", pa.string(), "The night it was placed."),
        column(
            "judge", pa.string(), "Hash of the judge identity and prompt variants that placed the context's candidates."
        ),
        column("text_hash", pa.string(), "Hash of its text when placed (a changed text is refused)."),
        column("context_hash", pa.string(), "Hash of the context text when placed."),
    ]
)


NIGHTLY_ROLES = ("anchor", "inserted")
