"""Gaussian diffusion: noise schedule, training objective and the samplers we use for evaluation."""

import math

import numpy as np
import torch
import torch.nn.functional as F


def betas_for_alpha_bar(num_timesteps, alpha_bar, max_beta=0.999):
    """Discretise a continuous alpha_bar(t) on [0, 1] into betas."""
    betas = []
    for i in range(num_timesteps):
        t1, t2 = i / num_timesteps, (i + 1) / num_timesteps
        betas.append(min(1 - alpha_bar(t2) / alpha_bar(t1), max_beta))
    return np.array(betas, dtype=np.float64)


def get_named_beta_schedule(name, num_timesteps):
    if name == "linear":
        scale = 1000 / num_timesteps
        return np.linspace(scale * 1e-4, scale * 0.02, num_timesteps, dtype=np.float64)
    if name == "cosine":
        return betas_for_alpha_bar(num_timesteps, lambda t: math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2)
    raise NotImplementedError(f"unknown beta schedule: {name}")


class GaussianDiffusion:
    def __init__(self, betas, prediction="v", snr_gamma=5.0):
        self.betas = betas
        self.num_timesteps = len(betas)
        self.prediction = prediction
        self.snr_gamma = snr_gamma
        alphas = 1.0 - betas
        self.alphas_cumprod = np.cumprod(alphas)
        self.alphas_cumprod_prev = np.append(1.0, self.alphas_cumprod[:-1])
        self.sqrt_alphas_cumprod = np.sqrt(self.alphas_cumprod)
        self.sqrt_one_minus_alphas_cumprod = np.sqrt(1.0 - self.alphas_cumprod)

    def q_sample(self, x_start, t, noise):
        """Diffuse the data for t steps: sample from q(x_t | x_0)."""
        return (_extract(self.sqrt_alphas_cumprod, t, x_start.shape) * x_start
                + _extract(self.sqrt_one_minus_alphas_cumprod, t, x_start.shape) * noise)

    def training_losses(self, model, x_start, t, y, cond_drop_prob=0.1):
        noise = torch.randn_like(x_start)
        x_t = self.q_sample(x_start, t, noise)
        drop = torch.rand(y.shape[0], device=y.device) < cond_drop_prob
        y = torch.where(drop, torch.full_like(y, model.num_classes), y)
        model_output = model(x_t, t, y)
        alpha = _extract(self.sqrt_alphas_cumprod, t, x_start.shape)
        sigma = _extract(self.sqrt_one_minus_alphas_cumprod, t, x_start.shape)
        if self.prediction == "v":
            target = alpha * noise - sigma * x_start
        elif self.prediction == "eps":
            target = noise
        else:
            target = x_start
        snr = torch.from_numpy(self.alphas_cumprod / (1 - self.alphas_cumprod)).to(t.device)[t].float()
        weight = torch.clamp(snr, max=self.snr_gamma) / (snr + 1 if self.prediction == "v" else snr)
        mse = F.mse_loss(model_output, target, reduction="none").mean(dim=(1, 2, 3))
        return (weight * mse).mean()

    def predict_start(self, model_output, x_t, t):
        alpha = _extract(self.sqrt_alphas_cumprod, t, x_t.shape)
        sigma = _extract(self.sqrt_one_minus_alphas_cumprod, t, x_t.shape)
        if self.prediction == "v":
            return alpha * x_t - sigma * model_output
        if self.prediction == "eps":
            return (x_t - sigma * model_output) / alpha
        return model_output

    @torch.no_grad()
    def guided_output(self, model, x_t, t, y, guidance_scale):
        """Classifier-free guidance: push the conditional prediction away from the unconditional one."""
        null = torch.full_like(y, model.num_classes)
        out = model(torch.cat([x_t, x_t]), torch.cat([t, t]), torch.cat([y, null]))
        cond, uncond = out.chunk(2)
        return uncond + guidance_scale * (cond - uncond)

    @torch.no_grad()
    def ddim_sample_loop(self, model, shape, y, sample_steps=50, eta=0.0, guidance_scale=3.0, device="cuda"):
        x = torch.randn(*shape, device=device)
        steps = np.linspace(self.num_timesteps - 1, 0, sample_steps).round().astype(np.int64)
        for i, step in enumerate(steps):
            t = torch.full((shape[0],), int(step), device=device, dtype=torch.long)
            out = self.guided_output(model, x, t, y, guidance_scale)
            x0 = self.predict_start(out, x, t).clamp(-1, 1)
            a_t = self.alphas_cumprod[step]
            a_prev = self.alphas_cumprod[steps[i + 1]] if i + 1 < len(steps) else 1.0
            eps = (x - math.sqrt(a_t) * x0) / math.sqrt(1 - a_t)
            sigma = eta * math.sqrt((1 - a_prev) / (1 - a_t) * (1 - a_t / a_prev))
            x = math.sqrt(a_prev) * x0 + math.sqrt(1 - a_prev - sigma ** 2) * eps + sigma * torch.randn_like(x)
        return x


def _extract(arr, timesteps, broadcast_shape):
    out = torch.from_numpy(arr).to(device=timesteps.device)[timesteps].float()
    return out.reshape(-1, *([1] * (len(broadcast_shape) - 1)))
