#!/usr/bin/env python3
"""PEFT's training steps as a reference for engram's (tests/fixtures/lora/train-steps.safetensors).

On the tiny-f32 fixture model with the lora/r4 adapter (random non-zero A and B, alpha 16, all
seven targets), dropout off, one padded batch of three examples of different lengths (right
padding with id 0, attention mask 0 and label -100 there; labels only after each example's
prompt), trained as `engram train` trains: transformers' mean cross-entropy over the label
tokens, `torch.nn.utils.clip_grad_norm_(max_norm=1.0)` over the adapter parameters, then
`torch.optim.AdamW(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)`; the same batch
for three steps. Writes:

  ids_{i}, prompt_len_{i}       the examples (i = 0, 1, 2)
  loss                          the loss before each step, [3]
  norm                          the global gradient norm before clipping at each step, [3]
  grad.{module}.lora_{A,B}      the first step's gradients (PEFT layout: A [r, in], B [out, r])
  after.{module}.lora_{A,B}     the factors after the three steps

where {module} is the module path as engram names it (model.layers.L.self_attn.q_proj).

With --qwen2 or --qwen3: the same on tiny-qwen2 / tiny-qwen3 with lora-qwen2/r4 / lora-qwen3/r4,
into lora-qwen2/ or lora-qwen3/train-steps.safetensors.

Usage: python tests/peers/make_train_step_fixture.py [--qwen2 | --qwen3]
       (torch, transformers, peft, safetensors)
"""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import json  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FIX = os.path.join(ROOT, "tests", "fixtures")
LR, STEPS, MAX_NORM, WEIGHT_DECAY = 1e-3, 3, 1.0, 0.01
# (length, prompt length) of each example; the first token is the tiny model's BOS.
SHAPES = [(14, 8), (9, 4), (19, 12)]


def main():
    from peft import PeftModel
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM
    import peft
    import transformers

    torch.set_num_threads(2)
    torch.manual_seed(0)
    family = next((a[2:] for a in sys.argv[1:] if a in ("--qwen2", "--qwen3")), None)
    base_name, lora = (f"tiny-{family}", f"lora-{family}") if family else ("tiny-f32", "lora")
    base = AutoModelForCausalLM.from_pretrained(os.path.join(FIX, base_name), dtype=torch.float32,
                                                attn_implementation="eager")
    model = PeftModel.from_pretrained(base, os.path.join(FIX, lora, "r4"), is_trainable=True)
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    model.train()
    bos = base.config.bos_token_id
    g = torch.Generator().manual_seed(5)
    examples = []
    for n, p in SHAPES:
        ids = [bos] + torch.randint(0, bos, (n - 1,), generator=g).tolist()
        examples.append((ids, p))
    t = max(len(ids) for ids, _ in examples)
    input_ids = torch.zeros((len(examples), t), dtype=torch.long)
    labels = torch.full((len(examples), t), -100, dtype=torch.long)
    mask = torch.zeros((len(examples), t), dtype=torch.long)
    for i, (ids, p) in enumerate(examples):
        input_ids[i, :len(ids)] = torch.tensor(ids)
        labels[i, p:len(ids)] = torch.tensor(ids[p:])
        mask[i, :len(ids)] = 1

    params = {n: p for n, p in model.named_parameters() if p.requires_grad}

    def key(name):
        # base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight
        module, rest = name.split(".lora_")
        return module.removeprefix("base_model.model."), "lora_" + rest.split(".")[0]

    opt = torch.optim.AdamW(params.values(), lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=WEIGHT_DECAY)
    tensors = {}
    for i, (ids, p) in enumerate(examples):
        tensors[f"ids_{i}"] = torch.tensor(ids, dtype=torch.int64)
        tensors[f"prompt_len_{i}"] = torch.tensor([p], dtype=torch.int64)
    losses, norms = [], []
    for step in range(STEPS):
        opt.zero_grad()
        loss = model(input_ids=input_ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        if step == 0:
            for name, prm in params.items():
                module, factor = key(name)
                tensors[f"grad.{module}.{factor}"] = prm.grad.detach().clone().contiguous()
        norms.append(float(torch.nn.utils.clip_grad_norm_(list(params.values()), MAX_NORM)))
        losses.append(loss.item())
        opt.step()
    for name, prm in params.items():
        module, factor = key(name)
        tensors[f"after.{module}.{factor}"] = prm.detach().clone().contiguous()
    tensors["loss"] = torch.tensor(losses, dtype=torch.float32)
    tensors["norm"] = torch.tensor(norms, dtype=torch.float32)
    out = os.path.join(FIX, lora, "train-steps.safetensors")
    meta = {"versions": json.dumps({"torch": torch.__version__, "transformers": transformers.__version__,
                                    "peft": peft.__version__}),
            "settings": json.dumps({"lr": LR, "steps": STEPS, "max_grad_norm": MAX_NORM,
                                    "weight_decay": WEIGHT_DECAY, "pad_id": 0})}
    save_file(tensors, out, metadata=meta)
    print("wrote", out, "losses", losses, "norms", norms)


if __name__ == "__main__":
    main()
