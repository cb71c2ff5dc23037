# SPDX-License-Identifier: MIT
"""fmha as a HuggingFace transformers attention implementation: small randomly initialised
decoders (Llama-style with GQA; Mistral-style with a sliding window; Gemma 2-style with
logit soft-cap and a window) run with attn_implementation="fmha" and with "sdpa" on the
same weights: the prompt batch's logits are compared (bf16 on a GPU, fp32 on the CPU),
and 32 greedily generated tokens must be the same."""
import sys

import torch

try:
    import transformers
except ImportError:
    print("transformers is not installed; nothing to compare")
    sys.exit(0)

import _path  # noqa: F401
import fmha.integrations.transformers as fmha_hf

fmha_hf.register()
cuda = torch.cuda.is_available()
device, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
common = dict(vocab_size=1000, hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=8,
              num_key_value_heads=2, head_dim=32, max_position_embeddings=512)
configs = {
    "llama (GQA 8/2)": transformers.LlamaConfig(**common),
    "mistral (sliding window 24)": transformers.MistralConfig(**common, sliding_window=24),
}
if hasattr(transformers, "Gemma2Config"):
    configs["gemma2 (soft-cap 50, window 24)"] = transformers.Gemma2Config(
        **common, sliding_window=24, attn_logit_softcapping=50.0, final_logit_softcapping=None, query_pre_attn_scalar=32)
failed = 0
for name, config in configs.items():
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").to(device, dtype).eval()
    prompt = torch.randint(0, config.vocab_size, (2, 40), device=device)
    with torch.no_grad():
        logits_sdpa = model(prompt).logits.float()
        gen_sdpa = model.generate(prompt, max_new_tokens=32, do_sample=False, pad_token_id=0)
        if hasattr(model, "set_attn_implementation"):
            model.set_attn_implementation("fmha")
        else:  # transformers before set_attn_implementation
            model.config._attn_implementation = "fmha"
        logits_fmha = model(prompt).logits.float()
        gen_fmha = model.generate(prompt, max_new_tokens=32, do_sample=False, pad_token_id=0)
    err = (logits_fmha - logits_sdpa).abs().max().item()
    scale = logits_sdpa.abs().max().item()
    tol = 0.05 * scale if dtype == torch.bfloat16 else 1e-4 * scale
    same = torch.equal(gen_fmha, gen_sdpa)
    ok = err <= tol and same
    failed += not ok
    print(f"{name:34s} {device} {str(dtype)[6:]}: logits max |fmha - sdpa| {err:.4g} (tolerance {tol:.3g}), "
          f"32 greedy tokens {'identical' if same else 'DIFFER'}: {'ok' if ok else 'FAIL'}")
sys.exit(1 if failed else 0)
