"""Supervised fine-tuning of a Mixtral-style MoE with LoRA adapters, on the Hugging Face Trainer.

    python train_sft.py configs/sft_lora.yaml
"""

import math
import sys
from dataclasses import dataclass, field

import torch
import yaml
from torch.optim.lr_scheduler import LambdaLR
from transformers import Trainer, TrainingArguments, set_seed

from data import PaddingCollator, build_dataset, load_tokenizer
from lora import count_trainable, load_base_model, prepare_for_lora


@dataclass
class SFTArgs:
    model_name: str = "mistralai/Mixtral-8x7B-v0.1"
    train_file: str = "data/sft_train.jsonl"
    eval_file: str = "data/sft_eval.jsonl"
    output_dir: str = "runs/sft"
    max_seq_length: int = 4096
    packing: bool = True
    train_on_prompt: bool = False
    load_in_4bit: bool = False
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    target_modules: tuple = ("q_proj", "k_proj", "v_proj", "o_proj")
    modules_to_save: tuple = ()
    use_rslora: bool = False
    freeze_router: bool = True
    learning_rate: float = 2e-4
    warmup_ratio: float = 0.03
    min_lr_ratio: float = 0.1
    num_train_epochs: float = 3.0
    per_device_train_batch_size: int = 4
    gradient_accumulation_steps: int = 8
    weight_decay: float = 0.0
    max_grad_norm: float = 0.3
    bf16: bool = True
    gradient_checkpointing: bool = True
    neftune_noise_alpha: float = 5.0
    router_aux_loss_coef: float = 0.02
    seed: int = 42
    report_to: list = field(default_factory=lambda: ["wandb"])


def load_args(path: str) -> SFTArgs:
    with open(path) as f:
        raw = yaml.safe_load(f) or {}
    return SFTArgs(**raw)


def cosine_with_warmup(optimizer, num_warmup_steps: int, num_training_steps: int, min_lr_ratio: float = 0.0):
    """Linear warmup to the peak, then half a cosine down to `min_lr_ratio` of it (not to zero)."""
    def lr_lambda(step: int) -> float:
        if step < num_warmup_steps:
            return step / max(1, num_warmup_steps)
        progress = (step - num_warmup_steps) / max(1, num_training_steps - num_warmup_steps)
        cosine = 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
        return min_lr_ratio + (1.0 - min_lr_ratio) * cosine
    return LambdaLR(optimizer, lr_lambda)


def neftune_forward_hook(noise_alpha: float):
    """NEFTune: uniform noise on the input embeddings while training, scaled by alpha / sqrt(seq_len * dim)."""
    def hook(module, inputs, output):
        if module.training:
            dims = output.size(1) * output.size(2)
            magnitude = noise_alpha / math.sqrt(dims)
            output = output + torch.zeros_like(output).uniform_(-magnitude, magnitude)
        return output
    return hook


class MoESFTTrainer(Trainer):
    """The Trainer, with the cosine floor and the router's auxiliary losses logged next to the LM loss."""

    def __init__(self, *args, min_lr_ratio: float = 0.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.min_lr_ratio = min_lr_ratio

    def create_scheduler(self, num_training_steps: int, optimizer=None):
        if self.lr_scheduler is None:
            self.lr_scheduler = cosine_with_warmup(optimizer or self.optimizer,
                                                   self.args.get_warmup_steps(num_training_steps),
                                                   num_training_steps, self.min_lr_ratio)
        return self.lr_scheduler

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        outputs = model(**inputs, output_router_logits=True)
        loss, aux_loss = outputs["loss"], outputs["aux_loss"]
        if num_items_in_batch is not None and self.model_accepts_loss_kwargs is False:
            loss = loss * inputs["labels"].ne(-100).sum() / num_items_in_batch
        if self.state.global_step % self.args.logging_steps == 0 and aux_loss is not None:
            coef = self.model.config.router_aux_loss_coef
            self.log({"router_aux_loss": aux_loss.item(), "lm_loss": (loss - coef * aux_loss).item()})
        return (loss, outputs) if return_outputs else loss


def training_arguments(args: SFTArgs) -> TrainingArguments:
    return TrainingArguments(
        output_dir=args.output_dir,
        per_device_train_batch_size=args.per_device_train_batch_size,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        learning_rate=args.learning_rate,
        warmup_ratio=args.warmup_ratio,
        num_train_epochs=args.num_train_epochs,
        weight_decay=args.weight_decay,
        max_grad_norm=args.max_grad_norm,
        optim="adamw_torch_fused",
        adam_beta2=0.95,
        bf16=args.bf16,
        gradient_checkpointing=False,
        logging_steps=10,
        eval_strategy="steps",
        eval_steps=200,
        save_steps=200,
        save_total_limit=3,
        report_to=args.report_to,
        seed=args.seed,
        remove_unused_columns=False,
    )


def save_adapter(model, tokenizer, output_dir: str):
    model.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)


def main(config_path: str):
    args = load_args(config_path)
    set_seed(args.seed)
    tokenizer = load_tokenizer(args.model_name)
    splits = build_dataset({"train": args.train_file, "eval": args.eval_file}, tokenizer,
                           args.max_seq_length, args.packing, args.train_on_prompt, args.seed)
    model = load_base_model(args.model_name, args.load_in_4bit)
    model.config.router_aux_loss_coef = args.router_aux_loss_coef
    model.config.output_router_logits = True
    model = prepare_for_lora(model, args)
    print(count_trainable(model))
    if args.neftune_noise_alpha:
        model.get_input_embeddings().register_forward_hook(neftune_forward_hook(args.neftune_noise_alpha))
    trainer = MoESFTTrainer(model=model, args=training_arguments(args), train_dataset=splits["train"],
                            eval_dataset=splits["eval"], data_collator=PaddingCollator(tokenizer.pad_token_id),
                            min_lr_ratio=args.min_lr_ratio)
    trainer.train()
    save_adapter(trainer.model, tokenizer, args.output_dir)


if __name__ == "__main__":
    main(sys.argv[1])
