"""Attention masks.

Convention used throughout ``tfm``: a mask is a **boolean** tensor and ``True`` means *may attend*. A mask broadcasts
against the score matrix of shape ``(..., T, S)``: queries along rows, keys along columns.

PyTorch's ``nn.MultiheadAttention`` and ``nn.Transformer`` use the opposite convention for boolean masks
(``True`` = *ignore*); convert explicitly with :func:`to_torch_key_padding_mask` and :func:`to_torch_attn_mask`.
``F.scaled_dot_product_attention`` uses the same convention as ``tfm``.
"""

from __future__ import annotations

import torch
from torch import Tensor


def padding_mask(lengths: Tensor | list[int], max_len: int | None = None) -> Tensor:
    """Key mask ``(B, S)``: ``True`` at the first ``lengths[b]`` positions of row ``b`` (the real tokens)."""
    lengths = torch.as_tensor(lengths)
    if lengths.dim() != 1 or lengths.numel() == 0:
        raise ValueError(f"lengths must be a non-empty 1-D tensor of lengths, got shape {tuple(lengths.shape)}")
    if lengths.dtype.is_floating_point or lengths.dtype == torch.bool:
        raise TypeError(f"lengths must hold integers, got dtype {lengths.dtype}")
    longest = int(lengths.max())
    if int(lengths.min()) < 0:
        raise ValueError(f"lengths must be >= 0, got {lengths.tolist()}")
    max_len = longest if max_len is None else max_len
    if max_len < longest:
        raise ValueError(f"max_len={max_len} is shorter than the longest sequence ({longest})")
    positions = torch.arange(max_len, device=lengths.device)  # (S,)
    return positions[None, :] < lengths[:, None]  # (B, S)


def padding_mask_from_ids(ids: Tensor, pad_id: int) -> Tensor:
    """Key mask ``(B, S)`` that is ``True`` wherever ``ids`` is not the padding id."""
    if ids.dim() != 2:
        raise ValueError(f"ids must have shape (B, S), got {tuple(ids.shape)}")
    return ids != pad_id


def causal_mask(n_queries: int, n_keys: int | None = None, device: torch.device | str | None = None,
                window: int | None = None) -> Tensor:
    """Causal mask ``(T, S)``: query ``i`` may attend to keys ``0 .. i + (S - T)``.

    With ``S == T`` this is the lower triangle. With ``S > T`` the queries are the *last* ``T`` positions of the
    sequence, which is what incremental decoding with a key/value cache needs. With ``window=w`` it is a
    *sliding-window* mask: each query sees only the ``w`` most recent positions, itself included.
    """
    n_keys = n_queries if n_keys is None else n_keys
    if n_queries < 1 or n_keys < n_queries:
        raise ValueError(f"a causal mask needs 1 <= n_queries <= n_keys, got n_queries={n_queries}, n_keys={n_keys}")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise ValueError(f"window must be a positive int (positions a query sees, itself included), got {window!r}")
    ones = torch.ones(n_queries, n_keys, dtype=torch.bool, device=device)  # (T, S)
    shift = n_keys - n_queries  # query i sits at position i + shift
    mask = ones.tril(diagonal=shift)  # (T, S): no key after the query
    if window is not None:
        mask = mask.triu(diagonal=shift - window + 1)  # (T, S): no key window or more positions back
    return mask


def combine_masks(key_mask: Tensor | None = None, query_key_mask: Tensor | None = None) -> Tensor | None:
    """Combine a key padding mask ``(B, S)`` and a ``(T, S)`` mask (e.g. causal) into one ``(B, 1, T, S)`` mask.

    The head axis has size 1 so that the result broadcasts over heads. Either argument may be ``None``.
    """
    if key_mask is None and query_key_mask is None:
        return None
    if key_mask is not None:
        _require_bool(key_mask, "key_mask")
        if key_mask.dim() != 2:
            raise ValueError(f"key_mask must have shape (B, S), got {tuple(key_mask.shape)}")
    if query_key_mask is not None:
        _require_bool(query_key_mask, "query_key_mask")
        if query_key_mask.dim() != 2:
            raise ValueError(f"query_key_mask must have shape (T, S), got {tuple(query_key_mask.shape)}")
    if key_mask is None:
        return query_key_mask[None, None]  # (1, 1, T, S)
    combined = key_mask[:, None, None, :]  # (B, 1, 1, S)
    if query_key_mask is not None:
        if query_key_mask.shape[-1] != key_mask.shape[-1]:
            raise ValueError(
                f"key_mask has {key_mask.shape[-1]} keys but query_key_mask has {query_key_mask.shape[-1]}"
            )
        combined = combined & query_key_mask[None, None]  # (B, 1, T, S)
    return combined


def to_torch_key_padding_mask(key_mask: Tensor) -> Tensor:
    """``tfm`` key mask (True = real token) -> ``key_padding_mask`` of ``nn.MultiheadAttention`` (True = ignore)."""
    _require_bool(key_mask, "key_mask")
    return ~key_mask


def to_torch_attn_mask(mask: Tensor) -> Tensor:
    """``tfm`` mask (True = may attend) -> boolean ``attn_mask`` of ``nn.MultiheadAttention`` (True = not allowed)."""
    _require_bool(mask, "mask")
    return ~mask


def check_mask(mask: Tensor, scores_shape: tuple[int, ...]) -> None:
    """Raise a clear error unless ``mask`` is boolean and broadcasts to ``scores_shape`` = ``(..., T, S)``."""
    _require_bool(mask, "mask")
    # aligned from the right, each mask size is 1 or the scores' size (torch.broadcast_shapes would say the same, but
    # its first call imports sympy: ~2 s for every chapter that masks)
    fits = mask.dim() <= len(scores_shape) and all(
        m in (1, s) for m, s in zip(reversed(mask.shape), reversed(tuple(scores_shape)), strict=False))
    if not fits:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the attention scores of shape "
            f"{tuple(scores_shape)} (..., T queries, S keys); e.g. use (T, S), (B, 1, 1, S) or (B, 1, T, S)"
        )


def _require_bool(mask: Tensor, name: str) -> None:
    if not isinstance(mask, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"{name} must be a boolean tensor (True = may attend), got dtype {mask.dtype}; "
            "convert on purpose, e.g. mask = lengths_mask.bool()"
        )
