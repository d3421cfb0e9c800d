#!/usr/bin/env python3
"""PEFT reference adapters for engram's LoRA parity tests (tests/fixtures/lora/).

For the tiny-f32 fixture model, writes PEFT adapters with random (non-zero) A and B
(`init_lora_weights=False`: PEFT leaves both factors at nn.Linear's Kaiming-uniform init) and the
logits PEFT computes with each adapter applied, on fixed inputs:

  lora/r4/        r=4, alpha=16, all seven linear targets, every layer
  lora/r4-rs/     r=4, alpha=8, use_rslora (scale alpha/sqrt(r)), q/v only, layer 1 only
  lora/reference.safetensors   input_ids_{case}, logits_{adapter}_{case} (f32, eval mode)

With --qwen2 or --qwen3, the same for the tiny-qwen2 / tiny-qwen3 fixture instead, into
lora-qwen2/ or lora-qwen3/ (the r4 adapter only): PEFT's LoRA on those architectures.

Usage: python tests/peers/make_lora_fixtures.py [--qwen2 | --qwen3]
"""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import json  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FIX = os.path.join(ROOT, "tests", "fixtures")
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def main():
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM
    import peft
    import transformers

    torch.set_num_threads(2)
    family = next((a[2:] for a in sys.argv[1:] if a in ("--qwen2", "--qwen3")), None)
    base_name = f"tiny-{family}" if family else "tiny-f32"
    base_dir = os.path.join(FIX, base_name)
    out = os.path.join(FIX, f"lora-{family}" if family else "lora")
    os.makedirs(out, exist_ok=True)
    g = torch.Generator().manual_seed(7)
    cases = {
        "short": torch.tensor([[1792, 17, 300, 1024, 5, 77, 1500, 42]]),
        "long": torch.cat([torch.tensor([[1792]]), torch.randint(0, 1792, (1, 47), generator=g)], dim=1),
    }
    tensors = {f"input_ids_{k}": v[0].clone() for k, v in cases.items()}
    configs = {
        "r4": LoraConfig(r=4, lora_alpha=16, lora_dropout=0.05, target_modules=TARGETS, bias="none",
                         task_type="CAUSAL_LM", init_lora_weights=False),
        "r4-rs": LoraConfig(r=4, lora_alpha=8, lora_dropout=0.05, target_modules=["q_proj", "v_proj"],
                            layers_to_transform=[1], use_rslora=True, bias="none", task_type="CAUSAL_LM",
                            init_lora_weights=False),
    }
    if family:
        del configs["r4-rs"]
    for name, cfg in configs.items():
        torch.manual_seed(11 if name == "r4" else 12)
        base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32, attn_implementation="eager")
        model = get_peft_model(base, cfg).eval()
        with torch.no_grad():
            for case, ids in cases.items():
                tensors[f"logits_{name}_{case}"] = model(ids).logits[0].float().contiguous()
        adir = os.path.join(out, name)
        model.save_pretrained(adir)
        os.remove(os.path.join(adir, "README.md"))  # PEFT's generated model card
        cfg_path = os.path.join(adir, "adapter_config.json")
        acfg = json.load(open(cfg_path))
        acfg["base_model_name_or_path"] = f"tests/fixtures/{base_name}"  # not this machine's path
        acfg["target_modules"] = sorted(acfg["target_modules"])  # PEFT writes a set
        json.dump(acfg, open(cfg_path, "w"), indent=2, sort_keys=True)
    save_file(tensors, os.path.join(out, "reference.safetensors"),
              metadata={"versions": json.dumps({"torch": torch.__version__, "transformers": transformers.__version__,
                                                "peft": peft.__version__})})
    print("wrote", out, sorted(os.listdir(out)))


if __name__ == "__main__":
    main()
