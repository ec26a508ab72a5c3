"""The async Perplexity client: typed wire models, SSE streaming with resume, retries and errors."""

from ._client import PerplexityClient
from ._models import *  # noqa: F403
from ._models import __all__ as _models_all
from ._params import *  # noqa: F403
from ._params import __all__ as _params_all
from ._stream import EventStream

__all__ = ('EventStream', 'PerplexityClient', *_models_all, *_params_all)  # pyright: ignore[reportUnsupportedDunderAll]
