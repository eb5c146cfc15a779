/*
 * The forward pass of every model rill runs (Llama, Mistral, Qwen2, Qwen3, gpt-oss), written once over the device
 * interface (device_ops.h): pre-norm decoder layers of attention and a dense or mixture-of-experts MLP, each adding
 * into the residual stream.
 */
#include "device_ops.h"

#define TRY(call)                                                                                                      \
  do {                                                                                                                 \
    rill_status try_status_ = (call);                                                                                  \
    if (try_status_ != RILL_OK) return try_status_;                                                                    \
  } while (0)

rill_status rill_forward_layers(const rill_device_ops *ops, void *dev, const rill_model_config *c, int32_t T, int taps,
                                char *err, size_t err_cap) {
  TRY(ops->embed(dev, 0, T, err, err_cap));
  for (int32_t l = 0; l < c->num_layers; l++) {
    if (taps) TRY(ops->tap(dev, l, T, err, err_cap));
    TRY(ops->qkv(dev, l, T, err, err_cap));
    TRY(ops->rope_kv(dev, l, T, err, err_cap));
    TRY(ops->attend(dev, l, T, err, err_cap));
    TRY(ops->attn_out(dev, l, T, err, err_cap));
    if (c->num_experts > 0) {
      TRY(ops->router(dev, l, T, err, err_cap));
      TRY(ops->experts(dev, l, T, err, err_cap));
    } else {
      TRY(ops->gate_up(dev, l, T, err, err_cap));
      TRY(ops->down(dev, l, T, err, err_cap));
    }
  }
  if (taps) TRY(ops->tap(dev, c->num_layers, T, err, err_cap));
  return RILL_OK;
}
