"""Every mutation of the catalogue declares what the runner and the report need."""

import importlib.util
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from harness.power import catalogue

ISSUE_CLASSES = {
    "pooling method",
    "normalisation/activation",
    "head",
    "tokenisation",
    "batching/order",
    "chunked-prefill/prefix-cache state",
    "server encoding",
    "multimodal routing",
}
# the 2026 regressions of issue #25 that can exist on CPU (#56666 / #48214: single-process analogue)
CPU_REPLAYS = {
    "vllm#56639",
    "vllm#50661",
    "vllm#47772",
    "vllm#53091",
    "vllm#48901",
    "vllm#56666",
    "vllm#48214",
}


def test_catalogue_loads_and_every_mutation_declares_its_fields():
    muts = catalogue.load()
    assert len(muts) >= 20
    for m in muts:
        SpecifierSet(m.targets)
        assert m.bug_class in catalogue.BUG_CLASSES
        assert m.module.startswith("vllm.") and m.files and m.doc


def test_catalogue_covers_the_issue_classes_and_replays():
    muts = catalogue.load()
    assert ISSUE_CLASSES <= {m.bug_class for m in muts}
    assert CPU_REPLAYS <= {m.replays for m in muts if m.needs is None}
    assert any(m.needs == "gpu" for m in muts)


def _vllm_root() -> Path | None:
    spec = importlib.util.find_spec("vllm")  # locates the package without importing it
    return Path(spec.origin).parent.parent if spec and spec.origin else None


@pytest.mark.skipif(_vllm_root() is None, reason="no vllm installed to read")
def test_every_target_module_and_file_exists_in_the_installed_vllm():
    """Of the mutations whose TARGETS hold the installed release: a mutation of another release
    (GritLM's, for 0.28 only) patches a module this one need not have."""
    from harness.engine.target import vllm_provenance
    from harness.power.hook import version_applies

    root = _vllm_root()
    version = vllm_provenance().get("version")
    here = [m for m in catalogue.load() if not version or version_applies(m.targets, version)]
    assert here, f"no mutation targets vLLM {version}"
    for m in here:
        module = root / (m.module.replace(".", "/") + ".py")
        assert module.is_file() or (module.with_suffix("") / "__init__.py").is_file(), m.name
        for f in m.files:
            assert (root / f).is_file(), f"{m.name}: FILES {f} not in {root}"


FIELDS = '''\
"""Breaks something."""
TARGETS = ">=0.32"
BUG_CLASS = "head"
REPLAYS = None
MODULE = "vllm.x"
FILES = ["vllm/x.py"]

def apply(module):
    pass
'''


@pytest.mark.parametrize(
    "edit,message",
    [
        (('TARGETS = ">=0.32"\n', ""), "does not declare TARGETS"),
        (('">=0.32"', '"not a version"'), "is not a version specifier"),
        (('"head"', '"heads"'), "BUG_CLASS 'heads'"),
        (("REPLAYS = None", 'REPLAYS = "#123"'), "should be 'vllm#NUMBER'"),
        (("REPLAYS = None\n", ""), "does not declare REPLAYS"),
        (('"vllm.x"', '"torch.x"'), "is not a vLLM module"),
        (('["vllm/x.py"]', "[]"), "FILES"),
        (("def apply(module)", "def apply_(module)"), "has no apply"),
        (('"""Breaks something."""\n', ""), "no docstring"),
    ],
)
def test_a_mutation_missing_a_field_is_refused_naming_file_and_field(tmp_path, edit, message):
    (tmp_path / "broken.py").write_text(FIELDS.replace(*edit))
    with pytest.raises(catalogue.CatalogueError, match=message) as e:
        catalogue.load(folder=tmp_path)
    assert "broken.py" in str(e.value)


def test_unknown_name_lists_the_known(tmp_path):
    (tmp_path / "good.py").write_text(FIELDS)
    assert [m.name for m in catalogue.load(folder=tmp_path)] == ["good"]
    with pytest.raises(catalogue.CatalogueError, match="known: good"):
        catalogue.load(["nope"], folder=tmp_path)
