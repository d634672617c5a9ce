"""tfm: the reference Transformer of the book *The Transformer, Token by Token*.

Layered so that each chapter can read its module without the ones above it:

- floor 0: :mod:`tfm.device`, :mod:`tfm.masks`, :mod:`tfm.positional`, :mod:`tfm.embedding`
- floor 1: :mod:`tfm.attention`, :mod:`tfm.multihead`
- floor 2: :mod:`tfm.layers`
- floor 3: :mod:`tfm.model`, :mod:`tfm.vision`, :mod:`tfm.modern` (today's decoder block, Llama-style)
- floor 4: :mod:`tfm.decoding`, :mod:`tfm.training`, :mod:`tfm.interop`, :mod:`tfm.distributed` (imported on
  demand: ``import tfm.distributed``)
- apart: :mod:`tfm.data`, :mod:`tfm.languages`, :mod:`tfm.corpus`, :mod:`tfm.bpe`, :mod:`tfm.ngram`,
  :mod:`tfm.kneser_ney`, :mod:`tfm.pydocs`, :mod:`tfm.incontext`, :mod:`tfm.circuits`, :mod:`tfm.lm`, :mod:`tfm.viz`,
  :mod:`tfm.check`; for the assistant, imported on demand: :mod:`tfm.chat` (template, SFT loss, packing),
  :mod:`tfm.lora` (low-rank adapters), :mod:`tfm.preference` (DPO and GRPO losses)
"""

from . import bpe, check, circuits, corpus, data, incontext, kneser_ney, languages, lm, modern, ngram, pydocs, viz
from .attention import attention, fast_attention
from .decoding import beam_search, generate, greedy_decode
from .device import generator, get_device, seed_everything
from .embedding import TokenEmbedding
from .layers import DecoderLayer, EncoderLayer, FeedForward
from .masks import (
    causal_mask,
    combine_masks,
    padding_mask,
    padding_mask_from_ids,
    to_torch_attn_mask,
    to_torch_key_padding_mask,
)
from .model import CausalLM, Decoder, Encoder, EncoderClassifier, EncoderDecoder, TransformerConfig, count_parameters
from .multihead import MultiHeadAttention
from .positional import LearnedPositionalEmbedding, RotaryEmbedding, SinusoidalPositionalEncoding, sinusoidal_table
from .training import LabelSmoothingLoss, noam_rate, noam_scheduler, train
from .vision import VisionTransformer, patchify

__version__ = "0.1.0"

__all__ = [
    "CausalLM", "Decoder", "DecoderLayer", "Encoder", "EncoderClassifier", "EncoderDecoder", "EncoderLayer",
    "FeedForward", "LabelSmoothingLoss", "LearnedPositionalEmbedding", "MultiHeadAttention", "RotaryEmbedding",
    "SinusoidalPositionalEncoding", "TokenEmbedding", "TransformerConfig", "attention", "beam_search", "causal_mask",
    "combine_masks", "count_parameters", "fast_attention", "generate", "generator", "get_device", "greedy_decode",
    "noam_rate",
    "noam_scheduler", "padding_mask", "padding_mask_from_ids", "seed_everything", "sinusoidal_table",
    "to_torch_attn_mask", "to_torch_key_padding_mask", "train", "VisionTransformer", "patchify", "check", "data", "viz",
    "languages", "bpe", "corpus", "modern", "ngram", "incontext", "lm", "kneser_ney", "pydocs", "circuits",
]
