#!/usr/bin/env python3
"""transformers' greedy answers from a GGUF file (transformers dequantizes it to f32, as its GGUF
loader does): the reference for `engram generate --chat` on a real published file.

    pip install torch transformers gguf accelerate
Usage: python hf_gguf_greedy.py MODEL.gguf PROMPTS.json N OUT.json
PROMPTS.json: a list of user messages. OUT.json: [{"prompt", "chat_ids", "greedy_ids", "text"}].
"""
import json
import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def main():
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer
    path, prompts, n, out = sys.argv[1], json.load(open(sys.argv[2])), int(sys.argv[3]), sys.argv[4]
    torch.set_num_threads(2)
    d, f = os.path.dirname(os.path.abspath(path)), os.path.basename(path)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32).eval()
    rows = []
    for p in prompts:
        text = tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                       add_generation_prompt=True)
        ids = tok(text, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            gen = model.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False)[0, len(ids):]
        rows.append({"prompt": p, "chat_ids": ids, "greedy_ids": gen.tolist(),
                     "text": tok.decode(gen, skip_special_tokens=True)})
        print(json.dumps(rows[-1]["text"]), flush=True)
    json.dump({"transformers": transformers.__version__, "torch": torch.__version__, "rows": rows},
              open(out, "w"), indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()
