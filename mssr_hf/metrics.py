"""Every metric of ``mssr_hf`` under one name: the answer scores of :mod:`mssr_hf.scoring` (exact match and its
normalisation, SQuAD F1, BLEU, ROUGE-L, multiple-choice accuracy) and the accuracy-matrix metrics of
:mod:`mssr_hf.cl_metrics` (average forgetting, backward transfer, final average, normalised score).

This module only re-exports them, so that ``from mssr_hf.metrics import average_forgetting, exact_match`` keeps
working; the code and its documentation live in the two modules above.
"""

from . import cl_metrics, scoring
from .cl_metrics import *  # noqa: F403
from .scoring import *  # noqa: F403

__all__ = [*cl_metrics.__all__, *scoring.__all__]
