"""Actor-critic networks in Keras 3: separate policy and value MLPs, diagonal Gaussian policy."""

import numpy as np
import keras
from keras import layers, ops


def orthogonal(gain: float) -> keras.initializers.Initializer:
    return keras.initializers.Orthogonal(gain=gain)


class MLPTorso(keras.layers.Layer):
    """Dense-tanh stack with orthogonal init (gain sqrt(2)), the PPO-paper default."""

    def __init__(self, hidden_sizes=(64, 64), activation="tanh", use_layer_norm=False, **kwargs):
        super().__init__(**kwargs)
        self.hidden_sizes = tuple(hidden_sizes)
        self.activation = activation
        self.use_layer_norm = use_layer_norm

    def build(self, input_shape):
        self.dense_layers = [layers.Dense(size, activation=self.activation,
                                          kernel_initializer=orthogonal(np.sqrt(2)),
                                          bias_initializer="zeros") for size in self.hidden_sizes]
        self.norms = [layers.LayerNormalization() for _ in self.hidden_sizes] if self.use_layer_norm else []
        super().build(input_shape)

    def call(self, x):
        for i, dense in enumerate(self.dense_layers):
            x = dense(x)
            if self.norms:
                x = self.norms[i](x)
        return x


class GaussianActor(keras.Model):
    """Mean from the torso, state-independent log standard deviation as a free parameter."""

    def __init__(self, action_dim: int, hidden_sizes=(64, 64), log_std_init: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.action_dim = action_dim
        self.torso = MLPTorso(hidden_sizes, name="actor_torso")
        self.mean_head = layers.Dense(action_dim, kernel_initializer=orthogonal(0.01), name="mean")
        self.log_std_init = log_std_init

    def build(self, input_shape):
        self.log_std = self.add_weight(shape=(self.action_dim,), name="log_std",
                                       initializer=keras.initializers.Constant(self.log_std_init))
        super().build(input_shape)

    def call(self, obs):
        mean = self.mean_head(self.torso(obs))
        return mean, ops.broadcast_to(self.log_std, ops.shape(mean))


class Critic(keras.Model):
    def __init__(self, hidden_sizes=(64, 64), **kwargs):
        super().__init__(**kwargs)
        self.torso = MLPTorso(hidden_sizes, name="critic_torso")
        self.value_head = layers.Dense(1, kernel_initializer=orthogonal(1.0), name="value")

    def call(self, obs):
        return ops.squeeze(self.value_head(self.torso(obs)), axis=-1)


def gaussian_log_prob(actions, mean, log_std):
    var = ops.exp(2.0 * log_std)
    logp = -0.5 * (ops.square(actions - mean) / var + 2.0 * log_std + np.log(2.0 * np.pi))
    return ops.sum(logp, axis=-1)


def gaussian_entropy(log_std):
    return ops.sum(log_std + 0.5 * np.log(2.0 * np.pi * np.e), axis=-1)
