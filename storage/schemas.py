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


def _field(name: str, type_: pa.DataType, doc: str, nullable: bool = False) -> pa.Field:
    return pa.field(name, type_, nullable=nullable, metadata={"description": doc})


CANDIDATES = pa.schema(
    [
        _field(
            "context_id", pa.string(), "Identifier of the input (document, dialogue, prompt) the candidate answers."
        ),
        _field("context", pa.string(), "The input text shown to the judge before the candidates."),
        _field("candidate_id", pa.string(), "Identifier of the candidate, unique in the table."),
        _field("system", pa.string(), "Name of the system (model, writer) that produced the candidate."),
        _field("text", pa.string(), "The candidate text."),
    ]
)


#: CANDIDATES' optional column: a table may carry it (after the schema's columns) or not.
CATEGORY = _field(
    "category",
    pa.string(),
    "Category of the context (a task type, a domain); the same for every candidate of a context. "
    "`pairank leaderboard` adds one leaderboard per category. Null: the context has none.",
    nullable=True,
)


#: CANDIDATES' optional column: the context as a conversation (a system prompt, earlier turns).
CONVERSATION = _field(
    "conversation",
    pa.string(),
    "The context as a conversation: JSON of a list of messages {role: system|user|assistant, content: text} that "
    "ends with a user message (storage.conversations); the same for every candidate of a context. `context` holds "
    "its transcript, and prompts show the messages turn by turn. Null: the context is one user message.",
    nullable=True,
)

#: CANDIDATES' optional column: the candidate's own replies to the conversation's earlier user turns.
PRIOR_REPLIES = _field(
    "prior_replies",
    pa.string(),
    "JSON list of the candidate's own replies to the conversation's earlier user turns, one per turn before the "
    "last (MT-Bench's second turn: the model's first answer); `text` is its reply to the last. Null: none.",
    nullable=True,
)

#: CANDIDATES' optional column: a reference answer of the context.
REFERENCE = _field(
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
        _field("candidate_id", pa.string(), "Candidate the counts are of."),
        _field(
            "length",
            pa.float64(),
            "Its length as the source counts it (tokens in LMArena's and Arena-Hard's metadata; characters when "
            "counted from the text).",
        ),
        _field("headers", pa.float64(), "Markdown headers (h1 to h6)."),
        _field("bold", pa.float64(), "Bold spans (** and __)."),
        _field("lists", pa.float64(), "List items (ordered and unordered)."),
    ]
)


HUMAN_SCORES = pa.schema(
    [
        _field("candidate_id", pa.string(), "Candidate the score belongs to."),
        _field("aspect", pa.string(), "Aspect scored, e.g. coherence."),
        _field("score", pa.float64(), "Human score (the mean over annotators where there are several)."),
    ]
)


PAIRWISE_LABELS = pa.schema(
    [
        _field("context_id", pa.string(), "Input both candidates answer."),
        _field("candidate_a", pa.string(), "First candidate of the pair."),
        _field("candidate_b", pa.string(), "Second candidate of the pair."),
        _field("preferred", pa.string(), "Human verdict: 'A' (candidate_a is better), 'B' or 'tie'."),
    ]
)


REQUESTS = pa.schema(
    [
        _field("key", pa.string(), "Stable hash of everything that determines the judgment (see storage.keys)."),
        _field("context_id", pa.string(), "Input both candidates answer."),
        _field("aspect", pa.string(), "Aspect the judge compares."),
        _field("candidate_a", pa.string(), "Candidate shown in slot A."),
        _field("candidate_b", pa.string(), "Candidate shown in slot B."),
        _field("prompt", pa.string(), "The rendered judge prompt."),
        _field("prompt_hash", pa.string(), "Hash of the prompt template the prompt was rendered from."),
    ]
)


JUDGMENTS = pa.schema(
    [
        _field("key", pa.string(), "Stable hash of everything that determines the judgment."),
        _field("engine", pa.string(), "Judge engine: vllm, http, replay."),
        _field("model", pa.string(), "Judge model name or path."),
        _field("revision", pa.string(), "Model revision (a commit or a content hash of the weights folder)."),
        _field("prompt_hash", pa.string(), "Hash of the prompt template."),
        _field("sampling", pa.string(), "Sampling settings as canonical JSON."),
        _field("context_id", pa.string(), "Input both candidates answer."),
        _field("aspect", pa.string(), "Aspect compared."),
        _field("candidate_a", pa.string(), "Candidate in slot A."),
        _field("candidate_b", pa.string(), "Candidate in slot B."),
        _field("p_a", pa.float64(), "P(A) / (P(A) + P(B)) at the answer position; null on error.", nullable=True),
        _field("logprob_a", pa.float64(), "Log-probability of label A (all its surface forms).", nullable=True),
        _field("logprob_b", pa.float64(), "Log-probability of label B (all its surface forms).", nullable=True),
        _field("label", pa.string(), "Parsed verdict: 'A', 'B' or 'tie'; null on error.", nullable=True),
        _field("raw_text", pa.string(), "Generated text, where the judge generated any.", nullable=True),
        _field("input_tokens", pa.int64(), "Prompt tokens."),
        _field("output_tokens", pa.int64(), "Generated tokens."),
        _field("seconds", pa.float64(), "Engine seconds attributed to this judgment."),
        _field("error", pa.string(), "Why no verdict was produced; null when it was.", nullable=True),
        _field("created_at", pa.timestamp("us", tz="UTC"), "When the judgment was made."),
    ]
)


PASS_REQUESTS = pa.schema(
    [
        _field("key", pa.string(), "Stable hash of everything that determines the pass's outcome."),
        _field("context_id", pa.string(), "Input the output answers."),
        _field("aspect", pa.string(), "Aspect the pass is about."),
        _field("kind", pa.string(), "analysis (PRePair), analysis_pairwise (PRePair^) or score (pointwise)."),
        _field("candidate_id", pa.string(), "The output analysed or scored."),
        _field("other_id", pa.string(), "analysis_pairwise: the other output shown; '' otherwise."),
        _field("focus", pa.string(), "analysis_pairwise: the slot (A or B) of the analysed output; '' otherwise."),
        _field("prompt", pa.string(), "The rendered prompt."),
        _field("prompt_hash", pa.string(), "Hash of the template the prompt was rendered from."),
    ]
)


PASSES = pa.schema(
    [
        _field("key", pa.string(), "Stable hash of everything that determines the pass's outcome."),
        _field("engine", pa.string(), "Judge engine."),
        _field("model", pa.string(), "Judge model name or path."),
        _field("revision", pa.string(), "Model revision."),
        _field("prompt_hash", pa.string(), "Hash of the template."),
        _field("sampling", pa.string(), "Settings of the pass as canonical JSON."),
        _field("context_id", pa.string(), "Input the output answers."),
        _field("aspect", pa.string(), "Aspect the pass is about."),
        _field("kind", pa.string(), "analysis (PRePair), analysis_pairwise (PRePair^) or score (pointwise)."),
        _field("candidate_id", pa.string(), "The output analysed or scored."),
        _field("other_id", pa.string(), "analysis_pairwise: the other output shown; '' otherwise."),
        _field("focus", pa.string(), "analysis_pairwise: the slot (A or B) of the analysed output; '' otherwise."),
        _field("text", pa.string(), "The generated analysis, or the score distribution as JSON.", nullable=True),
        _field("score", pa.float64(), "score: the probability-weighted mean score; null otherwise.", nullable=True),
        _field("input_tokens", pa.int64(), "Prompt tokens."),
        _field("output_tokens", pa.int64(), "Generated tokens."),
        _field("seconds", pa.float64(), "Engine seconds attributed to this pass."),
        _field("error", pa.string(), "Why the pass produced nothing usable; null when it did.", nullable=True),
        _field("created_at", pa.timestamp("us", tz="UTC"), "When the pass was made."),
    ]
)


#: The kinds of a pass row.
PASS_KINDS = ("analysis", "analysis_pairwise", "score")


RANKINGS = pa.schema(
    [
        _field("context_id", pa.string(), "Input the candidates answer."),
        _field("aspect", pa.string(), "Aspect ranked."),
        _field("candidate_id", pa.string(), "Ranked candidate."),
        _field("system", pa.string(), "System that produced the candidate."),
        _field("method", pa.string(), "Scoring method, e.g. win_ratio_hard."),
        _field("score", pa.float64(), "Score under the method (higher is better)."),
        _field("rank", pa.int64(), "1 is best; ties share the smallest rank."),
        _field("n_comparisons", pa.int64(), "Comparisons that involved the candidate."),
    ]
)


SPEARMAN = pa.schema(
    [
        _field("aspect", pa.string(), "Aspect compared with human scores."),
        _field("method", pa.string(), "Scoring method."),
        _field("level", pa.string(), "'sample' (per context, averaged) or 'dataset' (all candidates pooled)."),
        _field("rho", pa.float64(), "Spearman correlation with the human scores.", nullable=True),
        _field("ci_low", pa.float64(), "Lower end of the 95% bootstrap interval.", nullable=True),
        _field("ci_high", pa.float64(), "Upper end of the 95% bootstrap interval.", nullable=True),
        _field("n", pa.int64(), "Contexts (sample level) or candidates (dataset level) used."),
    ]
)


POSITION_BIAS = pa.schema(
    [
        _field("aspect", pa.string(), "Aspect judged."),
        _field("n", pa.int64(), "Judgments with a verdict."),
        _field(
            "slot_a_win_fraction", pa.float64(), "Fraction of judgments won by the candidate in slot A.", nullable=True
        ),
        _field("mean_p_a", pa.float64(), "Mean p_a over the judgments.", nullable=True),
    ]
)


WINRATES = pa.schema(
    [
        _field("aspect", pa.string(), "Aspect judged."),
        _field("system", pa.string(), "System whose win rate against the baseline is estimated."),
        _field("baseline", pa.string(), "Baseline system."),
        _field("method", pa.string(), "human, observed, bwrs, dawid_skene or dawid_skene_em (see operators.winrate)."),
        _field("prior", pa.string(), "Accuracy prior: none, in_dist or ood ('' where the method has none)."),
        _field("judge", pa.string(), "Judge the row is about, or '*' for all judges pooled."),
        _field("estimate", pa.float64(), "Posterior mean (point estimate for EM); null when refused.", nullable=True),
        _field("mode", pa.float64(), "Posterior mode (KDE of the draws for sampled methods).", nullable=True),
        _field("ci_low", pa.float64(), "Lower end of the credible interval.", nullable=True),
        _field("ci_high", pa.float64(), "Upper end of the credible interval.", nullable=True),
        _field("mass", pa.float64(), "Probability mass of the credible interval."),
        _field("n_pairs", pa.int64(), "Pairs (contexts with both systems) with at least one vote or label."),
        _field("n_judges", pa.int64(), "Judges whose votes went into the row."),
        _field("n_gold", pa.int64(), "Human-labelled pairs the method used (accuracies or observed latent labels)."),
        _field("n_ties", pa.int64(), "Tied swap-and-sum votes broken by the seeded coin."),
        _field("draws_kept", pa.int64(), "BWRS: draws kept; sampled methods: posterior draws.", nullable=True),
        _field("draws_dropped", pa.int64(), "BWRS: draws dropped (below chance or outside (0, 1)).", nullable=True),
        _field("rhat", pa.float64(), "Dawid-Skene: worst split R-hat.", nullable=True),
        _field("ess_bulk", pa.float64(), "Dawid-Skene: smallest bulk effective sample size.", nullable=True),
        _field("status", pa.string(), "'ok', or why no estimate (or a caveat) is given."),
    ]
)


WINRATE_JUDGES = pa.schema(
    [
        _field("aspect", pa.string(), "Aspect judged."),
        _field("system", pa.string(), "System compared with the baseline."),
        _field("baseline", pa.string(), "Baseline system."),
        _field("judge", pa.string(), "Judge name (model/mode or model@prompt)."),
        _field("n_votes", pa.int64(), "Pairs the judge voted on."),
        _field("n_ties", pa.int64(), "Tied votes broken by the coin."),
        _field("k", pa.float64(), "Observed win rate of the system: votes for it / votes.", nullable=True),
        _field("q0", pa.float64(), "Agreement on pairs the system truly wins (human labels used).", nullable=True),
        _field("q1", pa.float64(), "Agreement on pairs the baseline truly wins (human labels used).", nullable=True),
        _field("n_q0", pa.int64(), "Labelled pairs behind q0."),
        _field("n_q1", pa.int64(), "Labelled pairs behind q1."),
        _field("ds_q0", pa.float64(), "Dawid-Skene posterior mean of q0.", nullable=True),
        _field("ds_q1", pa.float64(), "Dawid-Skene posterior mean of q1.", nullable=True),
        _field("below_chance", pa.bool_(), "q0 + q1 < 1 (labels, else Dawid-Skene): reported, never inverted."),
    ]
)


META_EVAL = pa.schema(
    [
        _field("subset", pa.string(), "Context id up to its last '/' (LLMBar/Natural); '' for bare ids (one subset)."),
        _field("aspect", pa.string(), "Aspect judged."),
        _field("judge", pa.string(), "Judge name (model/mode or model@prompt; see operators.votes.judge_name)."),
        _field("engine", pa.string(), "Judge identity: engine."),
        _field("model", pa.string(), "Judge identity: model."),
        _field("revision", pa.string(), "Judge identity: model revision."),
        _field("prompt_hash", pa.string(), "Judge identity: prompt template hash."),
        _field("sampling", pa.string(), "Judge identity: sampling settings as canonical JSON."),
        _field("n_pairs", pa.int64(), "Labelled A/B pairs the judge judged in either order, error rows included."),
        _field("n_original", pa.int64(), "Of these, pairs judged in the labelled order (error rows included)."),
        _field("n_swapped", pa.int64(), "Of these, pairs judged in the swapped order (error rows included)."),
        _field("n_correct_False", pa.int64(), "Pairs right in the original order.", nullable=True),
        _field("n_correct_True", pa.int64(), "Pairs right in the swapped order.", nullable=True),
        _field("n_correct_both", pa.int64(), "Pairs right in both orders.", nullable=True),
        _field("n_equal", pa.int64(), "Pairs whose orders pick the same output (two no-verdicts too).", nullable=True),
        _field("correct_False", pa.string(), "Accuracy in the original order: 'n / total = x%'.", nullable=True),
        _field("correct_True", pa.string(), "Accuracy in the swapped order: 'n / total = x%'.", nullable=True),
        _field("correct_average", pa.string(), "Mean of the two accuracies: 'x%'.", nullable=True),
        _field("correct_both", pa.string(), "Right in both orders: 'n / total = x%'.", nullable=True),
        _field("equal", pa.string(), "Positional agreement (n_equal): 'n / total = x%'.", nullable=True),
        _field(
            "kappa_False",
            pa.float64(),
            "LLMBar's kappa of the original order: Cohen's kappa of (picks output 1 ? 1 : 0) against the label "
            "(1 or 2), so only 'both say 1' agrees; not the usual verdict-vs-label kappa. Null where undefined.",
            nullable=True,
        ),
        _field("kappa_True", pa.float64(), "The same for the swapped order.", nullable=True),
        _field("kappa_average", pa.float64(), "(kappa_False + kappa_True) / 2.", nullable=True),
        _field(
            "kappa_agreement",
            pa.float64(),
            "Cohen's kappa between the two orders' 'picks output 1' (a missing verdict counts as not 1).",
            nullable=True,
        ),
    ]
)


#: LEADERBOARD's style-controlled columns (added after the first boards: see :func:`later_fields`).
STYLE_COLUMNS = [
    _field(
        "style_strength",
        pa.float64(),
        "Style-controlled Bradley-Terry strength (length and markdown held equal; operators.style_control), "
        "centred to mean 0; null where not identified or without candidate texts.",
        nullable=True,
    ),
    _field(
        "style_low",
        pa.float64(),
        "Lower end of its 95% interval: with n_boot > 0 the bootstrap percentile interval over contexts resampled "
        "with replacement (compat lmarena: over battles), with n_boot 0 the Wald interval of the fit (compat "
        "lmarena: arena-rank's sandwich interval); leaderboard.json's `intervals` names it.",
        nullable=True,
    ),
    _field("style_high", pa.float64(), "Upper end of that interval.", nullable=True),
    _field("style_rank", pa.int64(), "Rank by style-controlled strength (1 is best).", nullable=True),
    _field(
        "lc_win_rate",
        pa.float64(),
        "Length-controlled win rate against the baseline, per aspect: by default pairank's fit over all systems "
        "(a strength each; the judge's tanh of the length difference and slot term shared; "
        "operators.style_control) at equal length, slots balanced; under compat alpaca-eval AlpacaEval 2's GLM "
        "(operators.compat).",
        nullable=True,
    ),
    _field(
        "lc_low",
        pa.float64(),
        "Lower end of its 95% interval: Wald's by default; under compat alpaca-eval the LC win rate -/+ 1.96 of "
        "AlpacaEval's standard error. No bootstrap.",
        nullable=True,
    ),
    _field("lc_high", pa.float64(), "Upper end of that interval.", nullable=True),
    _field(
        "style_status",
        pa.string(),
        "'ok', or why the style-controlled columns are null (not identified, no candidate texts).",
        nullable=True,
    ),
]


LEADERBOARD = pa.schema(
    [
        _field("aspect", pa.string(), "Aspect ranked, or 'overall' (every aspect's judgments pooled)."),
        _field("system", pa.string(), "System ranked."),
        _field("rank", pa.int64(), "1 is best, by strength; equal strengths share the smallest rank."),
        _field(
            "strength",
            pa.float64(),
            "Bradley-Terry log-strength theta, centred to mean 0 over the aspect's systems: P(x beats y) = "
            "1 / (1 + exp(theta_y - theta_x)); with the virtual-tie prior, or under compat lmarena arena-rank's "
            "maximum likelihood without one.",
        ),
        _field(
            "strength_low",
            pa.float64(),
            "Lower end of its interval at `mass`: the bootstrap percentile interval over contexts resampled with "
            "replacement (compat lmarena: over battles; with n_boot 0 arena-rank's sandwich interval, else null); "
            "leaderboard.json's `intervals` names it.",
            nullable=True,
        ),
        _field("strength_high", pa.float64(), "Upper end of that interval.", nullable=True),
        _field("elo", pa.float64(), "Strength on an Elo-like scale: 1000 + 400 / ln(10) * strength (mean 1000)."),
        _field("elo_low", pa.float64(), "strength_low on the Elo-like scale.", nullable=True),
        _field("elo_high", pa.float64(), "strength_high on the Elo-like scale.", nullable=True),
        _field("mass", pa.float64(), "Probability mass of the strength intervals."),
        _field(
            "n_boot",
            pa.int64(),
            "Bootstrap refits (resampled contexts; compat lmarena: battles) in which the system was compared.",
        ),
        _field("win_ratio", pa.float64(), "Hard win ratio: (wins + ties / 2) / n_judgments."),
        _field("n_judgments", pa.int64(), "Judgments with a verdict involving the system: the comparisons behind it."),
        _field("n_wins", pa.int64(), "Of these, judgments the system won."),
        _field("n_losses", pa.int64(), "Of these, judgments the system lost."),
        _field("n_ties", pa.int64(), "Of these, tied judgments (half a win to each side)."),
        _field("n_errors", pa.int64(), "Error rows (no verdict) that involve the system: skipped, counted here."),
        _field("n_contexts", pa.int64(), "Contexts (inputs) in which the system has a judgment with a verdict."),
        _field("n_opponents", pa.int64(), "Distinct other systems the system was compared with."),
        _field("n_judges", pa.int64(), "Distinct judge identities (engine, model, revision, prompt, sampling)."),
        _field("judges", pa.list_(pa.string()), "Their names (operators.votes.judge_names)."),
        _field("winrate_baseline", pa.string(), "Baseline of the carried win rate; null without one.", nullable=True),
        _field(
            "winrate_method",
            pa.string(),
            "Win-rate method carried (first with an estimate of dawid_skene, bwrs, observed by default); null if none.",
            nullable=True,
        ),
        _field("winrate_prior", pa.string(), "Accuracy prior of the carried win rate.", nullable=True),
        _field("winrate_estimate", pa.float64(), "Win rate against the baseline (from WINRATES).", nullable=True),
        _field("winrate_low", pa.float64(), "Lower end of its credible interval.", nullable=True),
        _field("winrate_high", pa.float64(), "Upper end of its credible interval.", nullable=True),
        _field("winrate_mass", pa.float64(), "Mass of that interval.", nullable=True),
        _field("winrate_n_pairs", pa.int64(), "Pairs behind the win rate.", nullable=True),
        _field("winrate_n_judges", pa.int64(), "Judges behind the win rate.", nullable=True),
        _field(
            "winrate_status",
            pa.string(),
            "'ok', 'baseline' for the baseline itself, or why no win rate is carried; null without win rates.",
            nullable=True,
        ),
        *STYLE_COLUMNS,
    ]
)


NIGHTLY_STATE = pa.schema(
    [
        _field("aspect", pa.string(), "Aspect ranked."),
        _field("context_id", pa.string(), "Input the candidate answers."),
        _field("candidate_id", pa.string(), "Placed candidate."),
        _field("system", pa.string(), "System that produced it."),
        _field("role", pa.string(), "'anchor' (sorted by PAIRS when the context first came) or 'inserted'."),
        _field("anchor_index", pa.int64(), "anchor: its place among the sorted anchors (0 is best).", nullable=True),
        _field("gap", pa.int64(), "inserted: how many anchors rank above it.", nullable=True),
        _field("mean_p", pa.float64(), "inserted: mean P(it beats the anchor) over its probes.", nullable=True),
        _field("order", pa.int64(), "Its place in the context's seeded order (the within-gap tie-break)."),
        _field("rank", pa.int64(), "Its place in the context's ranking (1 is best)."),
        _field("night", pa.string(), "The night it was placed."),
        _field(
            "judge", pa.string(), "Hash of the judge identity and prompt variants that placed the context's candidates."
        ),
        _field("text_hash", pa.string(), "Hash of its text when placed (a changed text is refused)."),
        _field("context_hash", pa.string(), "Hash of the context text when placed."),
    ]
)


NIGHTLY_ROLES = ("anchor", "inserted")
