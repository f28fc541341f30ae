"""The base model in bf16 (or 4-bit), with LoRA adapters on the attention projections and gradient checkpointing."""

import torch
from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
from transformers import AutoModelForCausalLM, BitsAndBytesConfig


def load_base_model(model_name: str, load_in_4bit: bool = False, attn_implementation: str = "flash_attention_2"):
    quantization = None
    if load_in_4bit:
        quantization = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                          bnb_4bit_compute_dtype=torch.bfloat16, bnb_4bit_use_double_quant=True)
    model = AutoModelForCausalLM.from_pretrained(model_name, torch_dtype=torch.bfloat16,
                                                 quantization_config=quantization,
                                                 attn_implementation=attn_implementation)
    model.config.use_cache = False
    return model


def make_lora_config(args) -> LoraConfig:
    return LoraConfig(
        r=args.lora_r,
        lora_alpha=args.lora_alpha,
        lora_dropout=args.lora_dropout,
        target_modules=list(args.target_modules),
        bias="none",
        use_rslora=args.use_rslora,
        modules_to_save=list(args.modules_to_save) or None,
        task_type="CAUSAL_LM",
    )


def freeze_router(model):
    """Keep the experts' gates (the routers) at their pretrained weights: only the adapters train."""
    for name, param in model.named_parameters():
        if name.endswith("block_sparse_moe.gate.weight"):
            param.requires_grad_(False)


def prepare_for_lora(model, args):
    if args.load_in_4bit:
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=args.gradient_checkpointing)
    elif args.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    model = get_peft_model(model, make_lora_config(args))
    if args.freeze_router:
        freeze_router(model)
    return model


def count_trainable(model) -> str:
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    return f"trainable {trainable / 1e6:.1f}M of {total / 1e9:.2f}B ({100 * trainable / total:.2f}%)"
