"""MTEB inside a runner's worker: our offline tasks (data shipped in harness/data/mteb, CC BY 4.0)
or real MTEB tasks the user has cached, with the runner wrapped as an mteb 2.x encoder or
cross-encoder. mteb computes the scores; results are written in mteb's own layout
(<out>/results/<org>__<model>/<runner>/<Task>.json), so mteb's tools read them.

Imported only inside worker processes (mteb imports torch).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from harness import settings

# the offline tasks' data; PARITY_MTEB_DATA points at another folder of the same layout
DATA_DIR = settings.current().mteb_data or Path(__file__).parent.parent / "data" / "mteb"
OFFLINE_TASKS = ("ParitySTS", "ParityClassification", "ParityRetrieval", "ParityReranking")
DATA_REVISION = "v1"  # recorded by mteb as dataset_revision: bump when the shipped data changes


def _load(name: str) -> dict:
    return json.loads((DATA_DIR / name).read_text(encoding="utf-8"))


def _task_meta(name: str, type_: str, main_score: str):
    """mteb's TaskMetadata of one of our offline tasks."""
    from mteb.abstasks.task_metadata import TaskMetadata

    return TaskMetadata(
        name=name,
        description=f"parity-harness offline {type_} task on data shipped in the repository.",
        dataset={"path": f"parity-harness/{name}", "revision": DATA_REVISION},
        type=type_,
        category="t2t",
        modalities=["text"],
        eval_splits=["test"],
        eval_langs=["eng-Latn"],
        main_score=main_score,
        license="cc-by-4.0",
    )


def _sts_dataset():
    """ParitySTS's data: sentence pairs with their scores (0-5)."""
    from datasets import Dataset, DatasetDict

    rows = _load("sts.json")["test"]
    columns = {
        "sentence1": [r[0] for r in rows],
        "sentence2": [r[1] for r in rows],
        "score": [float(r[2]) for r in rows],
    }
    return DatasetDict({"test": Dataset.from_dict(columns)})


def _classification_dataset():
    """ParityClassification's data: labelled texts, train and test."""
    from datasets import Dataset, DatasetDict

    d = _load("classification.json")

    def split(rows):
        return Dataset.from_dict({"text": [r[0] for r in rows], "label": [int(r[1]) for r in rows]})

    return DatasetDict({"train": split(d["train"]), "test": split(d["test"])})


def _retrieval_split(with_top_ranked: bool):
    """ParityRetrieval's (and, with its top-ranked lists, ParityReranking's) test split."""
    from datasets import Dataset
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalSplitData

    d = _load("retrieval.json")
    return RetrievalSplitData(
        queries=Dataset.from_list([{"id": k, "text": v} for k, v in d["queries"].items()]),
        corpus=Dataset.from_list(
            [{"id": k, "title": t, "text": x} for k, (t, x) in d["corpus"].items()]
        ),
        relevant_docs=d["qrels"],
        top_ranked=d["top_ranked"] if with_top_ranked else None,
    )


def _offline_tasks() -> dict[str, Any]:
    from mteb.abstasks.classification import AbsTaskClassification
    from mteb.abstasks.retrieval import AbsTaskRetrieval
    from mteb.abstasks.sts import AbsTaskSTS

    class ParitySTS(AbsTaskSTS):
        metadata = _task_meta("ParitySTS", "STS", "cosine_spearman")
        min_score = 0
        max_score = 5

        def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
            self.dataset = _sts_dataset()
            self.data_loaded = True

    class ParityClassification(AbsTaskClassification):
        metadata = _task_meta("ParityClassification", "Classification", "accuracy")

        def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
            self.dataset = _classification_dataset()
            self.data_loaded = True

    class ParityRetrieval(AbsTaskRetrieval):
        metadata = _task_meta("ParityRetrieval", "Retrieval", "ndcg_at_10")

        def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
            self.dataset = {"default": {"test": _retrieval_split(False)}}
            self.data_loaded = True

    class ParityReranking(AbsTaskRetrieval):
        metadata = _task_meta("ParityReranking", "Reranking", "map_at_1000")

        def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
            self.dataset = {"default": {"test": _retrieval_split(True)}}
            self.data_loaded = True

    return {
        c.metadata.name: c
        for c in (ParitySTS, ParityClassification, ParityRetrieval, ParityReranking)
    }


def get_tasks(names: Sequence[str]) -> list:
    """Our offline tasks by name; any other name is a real MTEB task, which must be in the user's
    datasets cache (HF_DATASETS_OFFLINE is set in workers: a missing one fails fast)."""
    import mteb

    ours = _offline_tasks()
    return [ours[n]() if n in ours else mteb.get_task(n) for n in names]


def _model_meta(name: str, revision: str):
    from mteb.models.model_meta import ModelMeta, ScoringFunction

    return ModelMeta.create_empty(
        overwrites=dict(
            name=name,
            revision=revision,
            similarity_fn_name=ScoringFunction.COSINE,
            framework=["PyTorch"],
            modalities=["text"],
        )
    )


def _encoder(encode_texts: Callable[[list[str]], np.ndarray], meta):
    from mteb.models.abs_encoder import AbsEncoder

    class RunnerEncoder(AbsEncoder):
        """mteb EncoderProtocol over one of our runners' `embed`."""

        def __init__(self) -> None:
            self.mteb_model_meta = meta

        def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs):
            texts = [t for batch in inputs for t in batch["text"]]
            out = np.asarray(encode_texts(texts), dtype=np.float32)
            if out.shape[0] != len(texts):
                raise ValueError(
                    f"runner returned {out.shape[0]} embeddings for {len(texts)} texts"
                )
            return out

    return RunnerEncoder()


class _PairScorer:
    """mteb CrossEncoderProtocol over one of our runners' `score` (no `encode`: mteb picks the
    cross-encoder path by the absence of it)."""

    def __init__(self, score_pairs: Callable[[list[tuple[str, str]]], np.ndarray], meta) -> None:
        self._score_pairs = score_pairs
        self.mteb_model_meta = meta

    def predict(
        self, inputs1, inputs2, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs
    ):
        q = [t for b in inputs1 for t in b["text"]]
        d = [t for b in inputs2 for t in b["text"]]
        return np.asarray(self._score_pairs(list(zip(q, d))), dtype=np.float32).reshape(-1)


def evaluate(
    run: Callable[[str, list], list[np.ndarray]],
    task: str,
    task_names: Sequence[str],
    model_name: str,
    revision: str,
    out_dir: Path,
) -> dict[str, dict[str, Any]]:
    """Run mteb with `run(task, items)` as the model. Returns {task: {main_score, main_metric,
    ...}}."""
    import mteb

    meta = _model_meta(model_name, revision)
    if task == "embed":
        model = _encoder(lambda texts: np.stack(run("embed", texts)), meta)
    elif task == "score":
        model = _PairScorer(
            lambda pairs: np.concatenate([np.reshape(x, -1) for x in run("score", pairs)]), meta
        )
    else:
        raise ValueError(f"MTEB evaluation needs an embed or score case, not {task!r}")
    res = mteb.evaluate(
        model,
        tasks=get_tasks(task_names),
        cache=mteb.ResultCache(cache_path=str(out_dir)),
        # the default reuses old result files without running the model
        overwrite_strategy="always",
        encode_kwargs={"batch_size": 64, "show_progress_bar": False},
        show_progress_bar=False,
        co2_tracker=False,
        raise_error=True,
    )
    return {
        tr.task_name: {
            "main_score": float(tr.get_score()),
            "main_metric": get_tasks([tr.task_name])[0].metadata.main_score,
            "evaluation_time": tr.evaluation_time,
        }
        for tr in res.task_results
    }
