#!/usr/bin/env python3
"""Regenerates engram's committed parity fixtures with HF transformers (the reference).

Needs the peer environment of ../shared/peers (torch, transformers, peft, safetensors, tokenizers,
gguf, accelerate). Writes under tests/fixtures/:

  tiny-f32/             random Llama-3.1-style checkpoint: f32, untied lm_head, llama3 rope
                        scaling, GQA (4 heads / 2 kv heads), one model.safetensors,
                        top-level rope_theta + rope_scaling (the transformers 4 spelling)
  tiny-f32/reference.safetensors       reference logits (shared/peers/reference_logits.py)
  tiny-bf16-tied/       same shapes, other seed: bf16 tensors, tied embeddings (no lm_head), two
                        shards + model.safetensors.index.json, transformers 5's rope_parameters
  tiny-bf16-tied/reference.safetensors
  tiny-qwen2/           random Qwen2ForCausalLM (the Qwen2/Qwen2.5 architecture) of the same shape: f32,
                        random q/k/v biases (no o bias), random norm weights, tied embeddings,
                        rope_theta 1e6, use_sliding_window false; tiny-f32's tokenizer files
  tiny-qwen2/reference.safetensors
  tiny-qwen3/           random Qwen3ForCausalLM: q_norm/k_norm (random weights), head_dim 32 with
                        hidden 64 (q is 128 wide), no biases, tied embeddings; tiny-f32's tokenizer
  tiny-qwen3/reference.safetensors
  tiny-mistral/         random MistralForCausalLM: sliding_window 4096 of max_position_embeddings 32768
                        (engram caps its context at the window), untied head; tiny-f32's tokenizer
  tiny-mistral/reference.safetensors
  tiny-qwen2.gguf, tiny-qwen3.gguf   the same weights as llama.cpp's `qwen2` / `qwen3` GGUF (gguf-py's writer, F32): `qwen2.*`
                        keys, q/k rows as HF stores them (llama.cpp permutes only `llama`), the q/k/v
                        biases, no output.weight (tied); tokenizer.ggml.* from tiny-f32's tokenizer.json
  chat_templates.json   Llama-3.1-Instruct renderings + ids (../shared/models tokenizer) and
                        ChatML renderings (SmolLM2's GGUF template) by apply_chat_template
  smollm2_reference.safetensors  (with --smollm2 GGUF) transformers' logits for SmolLM2-135M-Instruct
                        read from the GGUF, on a chat prompt, and its greedy answer

Usage: python tests/peers/make_fixtures.py [--smollm2 PATH.gguf]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
PEERS = os.path.join(SHARED, "peers")
FIX = os.path.join(ROOT, "tests", "fixtures")
# Small enough to commit; head_dim 16 with theta 5e5 and original context 256 still puts the
# rotary frequencies in all three llama3 bands (kept, smoothed, divided). Vocab 2048: the
# reference cases use ids up to 1500.
SHAPE = ["--layers", "2", "--hidden", "64", "--heads", "4", "--kv-heads", "2",
         "--intermediate", "128", "--vocab", "2048"]


def run(*args):
    print("+", " ".join(args), flush=True)
    subprocess.run([sys.executable, *args], check=True)


def reference(model_dir):
    """Reference logits, without the bf16-computed logits (not used; they double the file)."""
    from safetensors.torch import load_file, save_file
    from safetensors import safe_open
    out = os.path.join(model_dir, "reference.safetensors")
    run(os.path.join(PEERS, "reference_logits.py"), model_dir, out)
    with safe_open(out, "pt") as fh:
        meta = fh.metadata()
    t = {k: v for k, v in load_file(out).items() if not k.startswith("logits_bf16_")}
    save_file(t, out, metadata=meta)


def tiny_models():
    f32 = os.path.join(FIX, "tiny-f32")
    run(os.path.join(PEERS, "make_tiny_llama.py"), f32, "--seed", "1", "--dtype", "f32", *SHAPE)
    reference(f32)

    tied = os.path.join(FIX, "tiny-bf16-tied")
    run(os.path.join(PEERS, "make_tiny_llama.py"), tied, "--seed", "2", "--dtype", "bf16", "--shards", "2",
        "--no-verify", *SHAPE)
    # Tie the head: drop lm_head.weight from its shard and the index, flag the config, and switch
    # the config to transformers 5's rope_parameters spelling.
    from safetensors.torch import load_file, save_file
    idx_path = os.path.join(tied, "model.safetensors.index.json")
    idx = json.load(open(idx_path))
    shard = idx["weight_map"].pop("lm_head.weight")
    p = os.path.join(tied, shard)
    t = load_file(p)
    del t["lm_head.weight"]
    save_file(t, p, metadata={"format": "pt"})
    idx["metadata"]["total_size"] = sum(v.numel() * v.element_size() for s in set(idx["weight_map"].values())
                                        for v in load_file(os.path.join(tied, s)).values())
    json.dump(idx, open(idx_path, "w"), indent=2)
    cfg_path = os.path.join(tied, "config.json")
    cfg = json.load(open(cfg_path))
    cfg["tie_word_embeddings"] = True
    rp = cfg.pop("rope_scaling")
    rp["rope_theta"] = cfg.pop("rope_theta")
    cfg["rope_parameters"] = rp
    json.dump(cfg, open(cfg_path, "w"), indent=2)
    reference(tied)


def tiny_arch(family="qwen2"):
    import shutil
    import torch
    from transformers import (MistralConfig, MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM,
                              Qwen3Config, Qwen3ForCausalLM)
    out = os.path.join(FIX, f"tiny-{family}")
    src = os.path.join(FIX, "tiny-f32")
    os.makedirs(out, exist_ok=True)
    llama = json.load(open(os.path.join(src, "config.json")))
    torch.manual_seed({"qwen2": 3, "qwen3": 4, "mistral": 5}[family])
    common = dict(vocab_size=2048, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                  rope_theta=1e6, rms_norm_eps=1e-6, tie_word_embeddings=True,
                  use_sliding_window=False, bos_token_id=llama["bos_token_id"],
                  eos_token_id=llama["eos_token_id"])
    if family == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(**common)).float().eval()
    elif family == "mistral":
        common.pop("use_sliding_window")  # Mistral's window is `sliding_window` alone
        common.update(max_position_embeddings=32768, sliding_window=4096, tie_word_embeddings=False)
        model = MistralForCausalLM(MistralConfig(**common)).float().eval()
    else:
        model = Qwen3ForCausalLM(Qwen3Config(head_dim=32, attention_bias=False, **common)).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                # transformers initialises biases to zero, which would leave them untested.
                p.normal_(0.0, 0.1)
            elif "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.normal_(0.0, 0.08)
    attn = model.model.layers[0].self_attn
    assert (attn.q_proj.bias is not None) == (family == "qwen2") and attn.o_proj.bias is None
    model.save_pretrained(out, safe_serialization=True)
    for f in ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json"]:
        shutil.copy(os.path.join(src, f), os.path.join(out, f))
    reference(out)


def tiny_qwen_gguf(family="qwen2"):
    import gguf
    from safetensors.numpy import load_file
    src = os.path.join(FIX, f"tiny-{family}")
    cfg = json.load(open(os.path.join(src, "config.json")))
    tok = json.load(open(os.path.join(src, "tokenizer.json")))
    tcfg = json.load(open(os.path.join(src, "tokenizer_config.json")))
    w = gguf.GGUFWriter(os.path.join(FIX, f"tiny-{family}.gguf"), family)
    w.add_name(f"tiny-{family}")
    if "head_dim" in cfg:
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_rope_freq_base(cfg["rope_parameters"]["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    n = cfg["vocab_size"]
    tokens = [f"[PAD{i}]" for i in range(n)]
    types = [gguf.TokenType.UNUSED] * n
    for t, i in tok["model"]["vocab"].items():
        tokens[i], types[i] = t, gguf.TokenType.NORMAL
    for a in tok["added_tokens"]:
        tokens[a["id"]] = a["content"]
        types[a["id"]] = gguf.TokenType.CONTROL if a["special"] else gguf.TokenType.USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("llama-bpe")  # the tiny tokenizer's split regex is Llama 3's
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(cfg["bos_token_id"])
    w.add_eos_token_id(cfg["eos_token_id"][0])
    w.add_chat_template(tcfg["chat_template"])
    names = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
             "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
             "self_attn.k_norm": "attn_k_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down"}
    for name, t in sorted(load_file(os.path.join(src, "model.safetensors")).items()):
        if name == "model.embed_tokens.weight":
            g = "token_embd.weight"
        elif name == "model.norm.weight":
            g = "output_norm.weight"
        else:
            layer, rest = name[len("model.layers."):].split(".", 1)
            module, suffix = rest.rsplit(".", 1)
            g = f"blk.{layer}.{names[module]}.{suffix}"
        w.add_tensor(g, t.astype("float32"))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


CONVERSATIONS = [
    ("user_only", [{"role": "user", "content": "What time did Jeff Skerrow move the Tuesday budget meeting to?"}]),
    ("system_user", [{"role": "system", "content": "You answer from memory.  "},
                     {"role": "user", "content": "  Who approved the Dabhol plant audit?\n"}]),
    ("multi_turn", [{"role": "user", "content": "Hi!"}, {"role": "assistant", "content": "Hello, how can I help?"},
                    {"role": "user", "content": "naïve café – unicode, 3:30 PM, x34512"}]),
]


def chat_templates(smollm2):
    from transformers import AutoTokenizer
    out = {"llama31": [], "chatml": []}
    llama = AutoTokenizer.from_pretrained(os.path.join(SHARED, "models", "llama-3.1-8b-instruct-tokenizer"))
    for name, msgs in CONVERSATIONS:
        for gen in (True, False):
            text = llama.apply_chat_template(msgs, tokenize=False, add_generation_prompt=gen)
            ids = llama(text, add_special_tokens=False)["input_ids"]
            out["llama31"].append({"name": name, "add_generation_prompt": gen, "messages": msgs,
                                   "text": text, "ids": ids})
    if smollm2:
        smol = AutoTokenizer.from_pretrained(os.path.dirname(smollm2), gguf_file=os.path.basename(smollm2))
        for name, msgs in CONVERSATIONS:
            for gen in (True, False):
                text = smol.apply_chat_template(msgs, tokenize=False, add_generation_prompt=gen)
                ids = smol(text, add_special_tokens=False)["input_ids"]
                out["chatml"].append({"name": name, "add_generation_prompt": gen, "messages": msgs,
                                      "text": text, "ids": ids})
    with open(os.path.join(FIX, "chat_templates.json"), "w") as fh:
        json.dump(out, fh, indent=1, ensure_ascii=False)


def smollm2_reference(path):
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer
    torch.set_num_threads(2)
    d, f = os.path.dirname(path), os.path.basename(path)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32).eval()
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    ids = tok(text, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].float()
        gen = model.generate(torch.tensor([ids]), max_new_tokens=24, do_sample=False)[0, len(ids):]
    answer = tok.decode(gen, skip_special_tokens=True)
    t = {
        "input_ids": torch.tensor(ids, dtype=torch.int64),
        "logits_last4": logits[-4:].contiguous(),
        "argmax_all": logits.argmax(-1).to(torch.int64),
        "greedy": gen.to(torch.int64).contiguous(),
    }
    import transformers
    save_file(t, os.path.join(FIX, "smollm2_reference.safetensors"),
              metadata={"answer": answer, "prompt": text, "transformers": transformers.__version__,
                        "gguf_sha256": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"})
    print(f"SmolLM2 answer: {answer!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smollm2", help="path to SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--only", choices=["tiny", "qwen2", "qwen3", "mistral", "qwen-gguf", "chat", "smollm2"])
    args = ap.parse_args()
    os.makedirs(FIX, exist_ok=True)
    if args.only in (None, "tiny"):
        tiny_models()
    if args.only in (None, "qwen2"):
        tiny_arch("qwen2")
    if args.only in (None, "qwen3"):
        tiny_arch("qwen3")
    if args.only in (None, "mistral"):
        tiny_arch("mistral")
    if args.only in (None, "qwen2", "qwen-gguf"):
        tiny_qwen_gguf("qwen2")
    if args.only in (None, "qwen3", "qwen-gguf"):
        tiny_qwen_gguf("qwen3")
    if args.only in (None, "chat"):
        chat_templates(args.smollm2)
    if args.smollm2 and args.only in (None, "smollm2"):
        smollm2_reference(args.smollm2)


if __name__ == "__main__":
    main()
