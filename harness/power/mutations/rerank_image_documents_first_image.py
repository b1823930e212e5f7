"""A /rerank request's image documents all read its first document's image: every document of a
query is scored as that one picture (multimodal items mixed up within one request)."""

# The class of vllm#53553 (JinaVL's image items reordered against the processing cache) and
# vllm#53091 (a batch's text items answered as if they held its image), on the server's /rerank
# path: the documents' content parts are resolved before the pairs are built, and a mix-up there
# pairs the query with the wrong images. Offline LLM.score takes its pairs another way.
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "multimodal routing"
REPLAYS = None
MODULE = "vllm.entrypoints.pooling.scoring.io_processor"
FILES = ["vllm/entrypoints/pooling/scoring/io_processor.py"]
CASES = ["qwen3-vl-tiny-reranker-image-rerank-served"]  # image documents through /rerank
RUNNERS = ["vllm-serve-v1", "vllm-serve-v2"]
MATRIX = "matrices/multimodal.yaml"


def apply(module):
    cls = module.ScoringIOProcessor
    original = cls.valid_inputs_online

    def first_image(documents):
        images = [
            part
            for doc in documents
            if isinstance(doc, dict)
            for part in doc.get("content", [])
            if part.get("type") == "image_url"
        ]
        if not images:
            return documents
        return [
            {
                **doc,
                "content": [
                    images[0] if p.get("type") == "image_url" else p for p in doc["content"]
                ],
            }
            if isinstance(doc, dict)
            else doc
            for doc in documents
        ]

    def valid_inputs_online(self, request):
        if isinstance(request, module.RerankRequest) and isinstance(request.documents, list):
            request.documents = first_image(request.documents)
        return original(self, request)

    cls.valid_inputs_online = valid_inputs_online
