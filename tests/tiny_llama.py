"""A one-layer random Llama, for decoding-loop tests (imported only where torch and
transformers are)."""

from __future__ import annotations

from typing import Any


def tiny_llama(
    vocab_size: int,
    *,
    seed: int,
    eos: int,
    pad: int | None = None,
    bos: int | None = None,
    positions: int = 256,
) -> Any:
    """Seeded, so every test gets the same weights run after run; with ``pad`` the
    generation config also names ``pad`` and ``eos``, as a released checkpoint does."""
    import torch
    import transformers

    torch.manual_seed(seed)
    extra = {k: v for k, v in (("bos_token_id", bos), ("pad_token_id", pad)) if v is not None}
    config = transformers.LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=positions,
        eos_token_id=eos,
        **extra,
    )
    m = transformers.LlamaForCausalLM(config).eval()
    if pad is not None:
        m.generation_config.pad_token_id = pad
        m.generation_config.eos_token_id = eos
    return m
