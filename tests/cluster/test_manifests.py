"""The cloud manifests in cluster/ and the Dockerfile, read as the tools that use them would."""

from __future__ import annotations

import copy
import json
import re

import yaml

from pairank import SUBPACKAGES
from pairank.jobs.specs.job import parse_spec
from tests.helpers import ROOT

RAYJOB = ROOT / "cluster" / "kuberay-rayjob.yaml"
LAUNCHER = ROOT / "cluster" / "ray-cluster.yaml"


def rayjob_documents() -> dict[str, dict]:
    docs = [d for d in yaml.safe_load_all(RAYJOB.read_text()) if d]
    return {d["kind"]: d for d in docs}


def pod_specs(rayjob: dict) -> dict[str, dict]:
    cluster = rayjob["spec"]["rayClusterSpec"]
    pods = {"head": cluster["headGroupSpec"]["template"]["spec"]}
    pods.update({g["groupName"]: g["template"]["spec"] for g in cluster["workerGroupSpecs"]})
    return pods


def test_rayjob_runs_pairank_on_a_cpu_head_and_a_gpu_worker_group_of_one_image():
    docs = rayjob_documents()
    job = docs["RayJob"]
    assert job["apiVersion"] == "ray.io/v1"
    assert job["spec"]["shutdownAfterJobFinishes"] is True
    assert isinstance(job["spec"]["ttlSecondsAfterFinished"], int)
    entrypoint = job["spec"]["entrypoint"].split()
    assert entrypoint[:2] == ["pairank", "run"] and "cluster.address=auto" in entrypoint

    pods = pod_specs(job)
    containers = {name: pod["containers"][0] for name, pod in pods.items()}
    images = {c["image"] for c in containers.values()}
    assert len(images) == 1, images
    gpus = {name: c["resources"]["limits"].get("nvidia.com/gpu", 0) for name, c in containers.items()}
    assert gpus.pop("head") == 0
    assert gpus and all(n == 1 for n in gpus.values()), gpus

    # AWS credentials from a Secret, in every container (the driver and the judges reach S3).
    for c in containers.values():
        refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in c["env"] if "valueFrom" in e}
        assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= set(refs)


def test_rayjob_spec_comes_from_the_configmap_and_validates():
    docs = rayjob_documents()
    config_map, job = docs["ConfigMap"], docs["RayJob"]
    spec_path = job["spec"]["entrypoint"].split()[2]
    head = pod_specs(job)["head"]
    volumes = {v["name"]: v for v in head["volumes"]}
    mount = next(m for m in head["containers"][0]["volumeMounts"] if spec_path.startswith(m["mountPath"] + "/"))
    assert volumes[mount["name"]]["configMap"]["name"] == config_map["metadata"]["name"]
    text = config_map["data"][spec_path[len(mount["mountPath"]) + 1 :]]
    spec = parse_spec(yaml.safe_load(text), "the RayJob's ConfigMap")
    assert spec.input.startswith("s3://") and spec.output.startswith("s3://")
    assert spec.pool.num_gpus == 1
    # a pool that grows with the GPU workers KubeRay's autoscaler adds, up to the group's most
    gpu_groups = [g for g in job["spec"]["rayClusterSpec"]["workerGroupSpecs"] if g["groupName"] == "gpu"]
    assert job["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] is True
    assert spec.pool.sizes == (gpu_groups[0]["minReplicas"], gpu_groups[0]["maxReplicas"])
    # the prompts the spec names are in the image (the Dockerfile copies configs/ to /opt/pairank/configs)
    assert spec.prompts.startswith("/opt/pairank/configs/")
    assert (ROOT / spec.prompts.removeprefix("/opt/pairank/")).is_dir()


def test_cluster_launcher_config_passes_rays_schema_with_a_gpu_worker_on_the_same_image():
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = yaml.safe_load(LAUNCHER.read_text())
    validate_config(prepare_config(copy.deepcopy(config)))  # Ray's own schema, with the provider's defaults
    image = config["docker"]["image"]
    assert image == pod_specs(rayjob_documents()["RayJob"])["head"]["containers"][0]["image"]
    workers = {name: t for name, t in config["available_node_types"].items() if name != config["head_node_type"]}
    gpu = [t for t in workers.values() if "--gpus all" in t.get("docker", {}).get("worker_run_options", [])]
    assert gpu and all(t["docker"]["worker_image"] == image for t in gpu)
    assert all(t["min_workers"] >= 1 for t in gpu)


def test_dockerfile_installs_the_checkout_and_runs_a_spec_by_default():
    text = (ROOT / "Dockerfile").read_text()
    instructions = [line for line in text.splitlines() if re.match(r"^[A-Z]+ ", line)]
    assert instructions[0].startswith("FROM vllm/vllm-openai:")
    assert "WORKDIR /opt/pairank" in text and 'install --no-cache-dir -e ".[gpu]"' in text
    for folder in (*SUBPACKAGES, "configs"):
        assert f"COPY {folder} ./{folder}" in text
    last = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in instructions}
    assert json.loads(last["ENTRYPOINT"]) == []  # the base image's `vllm serve` entrypoint is reset
    assert json.loads(last["CMD"]) == ["pairank", "run", "/specs/job.yaml"]
