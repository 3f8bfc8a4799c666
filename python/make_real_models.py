#!/usr/bin/env python3
"""Writes test/fixtures/real/: Hugging Face architectures built from small
random configs (dropout 0), exported the way users export them, with
PyTorch's training references and forward logits.

For each architecture:
  <arch>.onnx        torch.onnx.export(model, inputs, path) with default
                     flags (the dynamo exporter and its optimiser), no dynamic
                     shapes: batch 8 fixed in the file, as users get it
  <arch>_dyn.onnx    the way docs/bring-your-own-model.md tells users to
                     export: the same with dynamic_shapes (a symbolic batch
                     dim "batch" on every input)
  <arch>/ref_sgd.json, <arch>/ref_adamw.json
                     PyTorch's per-step losses and grad norms: 5 steps of
                     SGD (lr 0.1) and AdamW (lr 1e-2) on batches of 8, in
                     train() mode, cross-entropy of every position's logits
                     against the labels (test/train/compare_losses.py)
  <arch>/logits.npy  the eval() logits of the first 8 samples (forward/)
  gpt2_op25.onnx, llama_op25.onnx, gpt2_op26.onnx
                     GPT-2 and Llama only: the dyn export at
                     opset_version=25, and GPT-2's taken to opset 26 by
                     onnx's version converter (export_opset); the same
                     weights, so <arch>/ref_*.json apply
  <arch>_noopt.onnx  the architectures in NOOPT only (T5, Gemma, Swin,
                     Gemma 2, MobileBERT, hfresnet, Marian, BiT, Funnel):
                     the dyn export with optimize=False (the fix smpc
                     names when it refuses the other two)
Shared data (16 samples; forward/ holds the first 8 of each input):
  input_ids.npy, labels.npy        8 tokens each, vocab 64 (the LMs; T5's
                                   and BART's encoder input and decoder
                                   labels)
  decoder_input_ids.npy            T5's and BART's decoder input (labels
                                   shifted right)
  pixel_values.npy, class_labels.npy   ViT: 3x16x16 images, 10 classes
  attention_mask.npy               left padding (each sample's last 3..8
                                   tokens kept)
  labels_pad.npy                   labels.npy with -100 where padded
  seq_labels.npy                   one of 3 classes a sample (BERT's
                                   and Data2VecAudio's sequence
                                   classification)
  input_values.npy                 Data2VecAudio: 160 raw audio samples

The model is wrapped so that its forward takes the inputs and returns the
logits (return_dict=False, use_cache=False). Which architectures train and
which are refused (and why) is asserted by test/smprun/real-models.test.

Needs torch and transformers (PyPI); CI only reads the committed files.
"""

import warnings

import numpy as np
import onnx
import torch
import transformers as T

import torch_refs

VOCAB, SEQ, BATCH, SAMPLES, STEPS = 64, 8, 8, 16, 5


IDS = ("input_ids",)
T5_INPUTS = ("input_ids", "decoder_input_ids")
VIT_INPUTS = ("pixel_values",)
AUDIO_INPUTS = ("input_values",)
AUDIO = 160  # raw samples a clip: 15 frames after the feature extractor
MASK_INPUTS = ("input_ids", "attention_mask")
SEQ_CLASSES = 3
IMAGE, PATCH, CLASSES = 16, 4, 10


def configs():
    """(name, model builder, input names, label file, classes)."""
    small = dict(vocab_size=VOCAB)
    lm = lambda name, build: (name, build, IDS, "labels", VOCAB)
    yield lm("gpt2", lambda: T.GPT2LMHeadModel(T.GPT2Config(
        n_layer=2, n_head=2, n_embd=16, n_positions=32, resid_pdrop=0,
        embd_pdrop=0, attn_pdrop=0, **small)))
    yield lm("bert", lambda: T.BertForMaskedLM(T.BertConfig(
        num_hidden_layers=2, num_attention_heads=2, hidden_size=16,
        intermediate_size=32, max_position_embeddings=32,
        hidden_dropout_prob=0, attention_probs_dropout_prob=0, **small)))
    yield lm("distilbert", lambda: T.DistilBertForMaskedLM(T.DistilBertConfig(
        n_layers=2, n_heads=2, dim=16, hidden_dim=32,
        max_position_embeddings=32, dropout=0, attention_dropout=0, **small)))
    yield lm("roberta", lambda: T.RobertaForMaskedLM(T.RobertaConfig(
        num_hidden_layers=2, num_attention_heads=2, hidden_size=16,
        intermediate_size=32, max_position_embeddings=40,
        hidden_dropout_prob=0, attention_probs_dropout_prob=0, **small)))
    yield lm("llama", lambda: T.LlamaForCausalLM(T.LlamaConfig(
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        hidden_size=16, intermediate_size=32, max_position_embeddings=32,
        **small)))
    yield lm("mistral", lambda: T.MistralForCausalLM(T.MistralConfig(
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        hidden_size=16, intermediate_size=32, max_position_embeddings=32,
        sliding_window=None, **small)))
    yield lm("gptneox", lambda: T.GPTNeoXForCausalLM(T.GPTNeoXConfig(
        num_hidden_layers=2, num_attention_heads=2, hidden_size=16,
        intermediate_size=32, max_position_embeddings=32, hidden_dropout=0,
        attention_dropout=0, **small)))
    yield lm("opt", lambda: T.OPTForCausalLM(T.OPTConfig(
        num_hidden_layers=2, num_attention_heads=2, hidden_size=16,
        ffn_dim=32, max_position_embeddings=32, word_embed_proj_dim=16,
        dropout=0, attention_dropout=0, **small)))
    # Tied input and output embeddings (tie_word_embeddings): the dynamo
    # exporter keeps one name for the shared tensor, the other is gone from
    # the file (its graph signature still lists it).
    yield lm("qwen2", lambda: T.Qwen2ForCausalLM(T.Qwen2Config(
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        hidden_size=16, intermediate_size=32, max_position_embeddings=32,
        tie_word_embeddings=True, **small)))
    # ALiBi (its slopes folded with the mask), tied embeddings.
    yield lm("bloom", lambda: T.BloomForCausalLM(T.BloomConfig(
        n_layer=2, n_head=2, hidden_size=16, hidden_dropout=0,
        attention_dropout=0, **small)))
    # Bias-free Linears computed as `x @ self.weight.T`: the optimiser folds
    # each weight's transpose into a `permute` initializer.
    yield lm("falcon", lambda: T.FalconForCausalLM(T.FalconConfig(
        num_hidden_layers=2, num_attention_heads=2, hidden_size=16,
        hidden_dropout=0, attention_dropout=0, **small)))
    # Falcon-40B's layout: two LayerNorms of one input (equal when fresh,
    # merged by the optimiser) and grouped key/value heads.
    yield lm("falcon40", lambda: T.FalconForCausalLM(T.FalconConfig(
        num_hidden_layers=2, num_attention_heads=4, num_kv_heads=2,
        hidden_size=16, new_decoder_architecture=True, hidden_dropout=0,
        attention_dropout=0, **small)))
    # Zero-centred RMSNorm, x * (1 + w) of a zero-initialised w: the
    # optimiser folds every norm's 1 + w into one constant (refused; the
    # optimize=False export trains).
    yield lm("gemma", lambda: T.GemmaForCausalLM(T.GemmaConfig(
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
        head_dim=8, hidden_size=16, intermediate_size=32,
        max_position_embeddings=32, **small)))
    # Local attention layers; its masks add torch.finfo.min (folded into a
    # `where` initializer: a buffer, never a parameter).
    yield lm("gptneo", lambda: T.GPTNeoForCausalLM(T.GPTNeoConfig(
        num_layers=2, num_heads=2, hidden_size=16, max_position_embeddings=32,
        attention_types=[[["global", "local"], 1]], window_size=4,
        embed_dropout=0, attention_dropout=0, resid_dropout=0, **small)))
    # Encoder-decoder: two inputs, the decoder's logits against the labels.
    # Eager attention: with its default (sdpa) torch 2.15's exporter fails
    # to decompose T5's attention (a view of a transposed tensor).
    yield ("t5", lambda: T.T5ForConditionalGeneration(T.T5Config(
        d_model=16, d_kv=8, d_ff=32, num_layers=2, num_decoder_layers=2,
        num_heads=2, relative_attention_num_buckets=8,
        relative_attention_max_distance=16, dropout_rate=0,
        feed_forward_proj="relu", decoder_start_token_id=0, pad_token_id=0,
        eos_token_id=1, attn_implementation="eager", **small)),
        T5_INPUTS, "labels", VOCAB)
    # One embedding shared by the encoder, the decoder and the LM head.
    yield ("bart", lambda: T.BartForConditionalGeneration(T.BartConfig(
        encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
        decoder_attention_heads=2, d_model=16, encoder_ffn_dim=32,
        decoder_ffn_dim=32, max_position_embeddings=32, dropout=0,
        attention_dropout=0, activation_dropout=0, decoder_start_token_id=0,
        pad_token_id=1, **small)), T5_INPUTS, "labels", VOCAB)
    # Fine-tuning with padding: an attention_mask input (left padding, as
    # for generation), the padded positions' labels -100 (as HF's
    # collators set them; cross_entropy ignores them).
    yield ("gpt2pad", lambda: T.GPT2LMHeadModel(T.GPT2Config(
        n_layer=2, n_head=2, n_embd=16, n_positions=32, resid_pdrop=0,
        embd_pdrop=0, attn_pdrop=0, **small)), MASK_INPUTS, "labels_pad",
        VOCAB)
    # Sequence classification: the pooler's [CLS] token, 3 classes.
    yield ("bertcls", lambda: T.BertForSequenceClassification(T.BertConfig(
        num_hidden_layers=2, num_attention_heads=2, hidden_size=16,
        intermediate_size=32, max_position_embeddings=32,
        hidden_dropout_prob=0, attention_probs_dropout_prob=0,
        num_labels=SEQ_CLASSES, **small)), MASK_INPUTS, "seq_labels",
        SEQ_CLASSES)
    # DeBERTa-v2 (v3's architecture): relative position buckets; its
    # head's bias is its decoder's (one tensor, two names); the plain
    # export folds an all-ones mask (made in the graph) and the positions.
    yield lm("debertav2", lambda: T.DebertaV2ForMaskedLM(T.DebertaV2Config(
        num_hidden_layers=2, num_attention_heads=2, hidden_size=16,
        intermediate_size=32, max_position_embeddings=32,
        hidden_dropout_prob=0, attention_probs_dropout_prob=0, **small)))
    # Image classification: a patch-embedding conv, a class token, 10 classes.
    yield ("vit", lambda: T.ViTForImageClassification(T.ViTConfig(
        image_size=IMAGE, patch_size=PATCH, num_channels=3, hidden_size=16,
        num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
        hidden_dropout_prob=0, attention_probs_dropout_prob=0,
        num_labels=CLASSES)), VIT_INPUTS, "class_labels", CLASSES)
    # Phi-3: one fused qkv projection and one fused gate/up projection,
    # split by slices of their outputs.
    yield lm("phi3", lambda: T.Phi3ForCausalLM(T.Phi3Config(
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        hidden_size=16, intermediate_size=32, max_position_embeddings=32,
        pad_token_id=0, bos_token_id=1, eos_token_id=2, **small)))
    # Qwen3: an RMSNorm of every head's queries and keys.
    yield lm("qwen3", lambda: T.Qwen3ForCausalLM(T.Qwen3Config(
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=4, hidden_size=16, intermediate_size=32,
        max_position_embeddings=32, **small)))
    # ConvNeXt V2: depthwise convs, channels-last LayerNorms, global
    # response normalisation; its pooler is the mean over dims (-2, -1).
    yield ("convnextv2", lambda: T.ConvNextV2ForImageClassification(
        T.ConvNextV2Config(num_channels=3, num_stages=2, patch_size=2,
                           hidden_sizes=[8, 16], depths=[1, 1],
                           drop_path_rate=0, num_labels=CLASSES)),
        VIT_INPUTS, "class_labels", CLASSES)
    # Swin: shifted windows, a relative position bias table (zeros when
    # fresh: the optimiser folds its gathers, refused; swin_noopt.onnx
    # trains), and AdaptiveAvgPool1d's as_strided view of the pooled
    # samples. Eager attention (torch 2.15 cannot decompose sdpa's here).
    yield ("swin", lambda: T.SwinForImageClassification(T.SwinConfig(
        image_size=IMAGE, patch_size=2, embed_dim=8, depths=[1, 1],
        num_heads=[2, 2], window_size=2, attn_implementation="eager",
        hidden_dropout_prob=0, attention_probs_dropout_prob=0,
        drop_path_rate=0, num_labels=CLASSES)),
        VIT_INPUTS, "class_labels", CLASSES)
    # Data2VecAudio for sequence classification (3 classes) on raw audio:
    # a convolutional feature extractor, then positional convolutions each
    # with a LayerNorm without weight or bias (elementwise_affine=False),
    # whose ones the optimiser merges with the encoder's LayerNorm weight.
    # SpecAugment off (it masks at random in train() mode, as dropout).
    yield ("d2vaudio", lambda: T.Data2VecAudioForSequenceClassification(
        T.Data2VecAudioConfig(
            hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=32, conv_dim=(8, 8), conv_kernel=(10, 3),
            conv_stride=(5, 2), num_conv_pos_embeddings=4,
            num_conv_pos_embedding_groups=2, classifier_proj_size=8,
            num_labels=SEQ_CLASSES, hidden_dropout=0.0,
            activation_dropout=0.0, attention_dropout=0.0,
            feat_proj_dropout=0.0, final_dropout=0.0, layerdrop=0.0,
            apply_spec_augment=False)),
        AUDIO_INPUTS, "seq_labels", SEQ_CLASSES)
    # CLIP's vision tower, its projection as a 10-class head: a patch
    # embedding Conv2d without a bias (the translation's zero bias, which the
    # optimiser removes, was no parameter), a class embedding, pre-LN.
    yield ("clip", lambda: T.CLIPVisionModelWithProjection(T.CLIPVisionConfig(
        image_size=IMAGE, patch_size=PATCH, num_channels=3, hidden_size=16,
        num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
        projection_dim=CLASSES)), VIT_INPUTS, "class_labels", CLASSES)
    # GPT-J: attention and MLP in parallel off one LayerNorm, rotary on the
    # first rotary_dim columns of a head in interleaved pairs; its sinusoid
    # table is a buffer (smpc freezes it and says so).
    yield lm("gptj", lambda: T.GPTJForCausalLM(T.GPTJConfig(
        n_layer=2, n_head=2, n_embd=16, rotary_dim=4, n_positions=32,
        resid_pdrop=0, embd_pdrop=0, attn_pdrop=0, **small)))
    # Phi-2: parallel attention and MLP, partial rotary (half the head).
    yield lm("phi", lambda: T.PhiForCausalLM(T.PhiConfig(
        num_hidden_layers=2, num_attention_heads=2, hidden_size=16,
        intermediate_size=32, max_position_embeddings=32,
        partial_rotary_factor=0.5, resid_pdrop=0, embd_pdrop=0,
        attention_dropout=0, **small)))
    # OLMo 2: norms after attention and MLP (not before), RMSNorms of the
    # whole query and key projections.
    yield lm("olmo2", lambda: T.Olmo2ForCausalLM(T.Olmo2Config(
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        hidden_size=16, intermediate_size=32, max_position_embeddings=32,
        pad_token_id=0, bos_token_id=1, eos_token_id=2, **small)))
    # Gemma 2: tanh soft-capping of the attention scores and the logits,
    # sliding-window layers, four norms a layer (Gemma's 1 + w: the plain
    # exports are refused, gemma2_noopt.onnx trains). Eager attention (its
    # soft-capping is not in sdpa).
    yield lm("gemma2", lambda: T.Gemma2ForCausalLM(T.Gemma2Config(
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=4, hidden_size=16, intermediate_size=32,
        max_position_embeddings=32, sliding_window=4,
        attn_implementation="eager", **small)))
    # Mixtral: a mixture of 4 experts, the top 2 a token (TopK of the
    # router's softmax, renormalised). experts_implementation="batched_mm"
    # (every token through every expert, weighted by its routing): torch
    # 2.15 exports neither the default grouped_mm (ConversionError) nor
    # eager's loop over the experts hit (a data-dependent shape).
    yield lm("mixtral", lambda: T.MixtralForCausalLM(T.MixtralConfig(
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        hidden_size=16, intermediate_size=32, max_position_embeddings=32,
        num_local_experts=4, num_experts_per_tok=2, sliding_window=None,
        experts_implementation="batched_mm", **small)))
    # MPT: ALiBi, bias-free Linears and LayerNorms.
    yield lm("mpt", lambda: T.MptForCausalLM(T.MptConfig(
        n_layers=2, n_heads=2, d_model=16, max_seq_len=32,
        expansion_ratio=2, **small)))
    # GPT-BigCode (StarCoder): multi-query attention, one key/value head.
    yield lm("gptbigcode", lambda: T.GPTBigCodeForCausalLM(
        T.GPTBigCodeConfig(n_layer=2, n_head=2, n_embd=16, n_positions=32,
                           multi_query=True, resid_pdrop=0, embd_pdrop=0,
                           attn_pdrop=0, **small)))
    # Granite: Llama with scalar multipliers on the embeddings, residuals,
    # attention scores and logits.
    yield lm("granite", lambda: T.GraniteForCausalLM(T.GraniteConfig(
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        hidden_size=16, intermediate_size=32, max_position_embeddings=32,
        embedding_multiplier=2.0, residual_multiplier=0.5,
        logits_scaling=4.0, attention_multiplier=0.3, **small)))
    # Cohere (Command R): parallel attention and MLP, LayerNorms without a
    # bias, a logit scale, tied embeddings.
    yield lm("cohere", lambda: T.CohereForCausalLM(T.CohereConfig(
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        hidden_size=16, intermediate_size=32, max_position_embeddings=32,
        logit_scale=0.5, **small)))
    # ELECTRA's generator: embeddings narrower than the hidden size, a
    # projection between.
    yield lm("electra", lambda: T.ElectraForMaskedLM(T.ElectraConfig(
        num_hidden_layers=2, num_attention_heads=2, hidden_size=16,
        embedding_size=8, intermediate_size=32, max_position_embeddings=32,
        hidden_dropout_prob=0, attention_probs_dropout_prob=0, **small)))
    # MobileBERT: bottlenecks, stacked feed-forward networks, NoNorm
    # (x * w + b); its head concatenates the decoder's weight with a dense
    # one: the plain exports fold that concat of parameters (smp reads the
    # fold as the tied weight beside the dense rows: all three train).
    yield lm("mobilebert", lambda: T.MobileBertForMaskedLM(
        T.MobileBertConfig(num_hidden_layers=2, num_attention_heads=2,
                           hidden_size=16, embedding_size=8,
                           intermediate_size=32, intra_bottleneck_size=8,
                           true_hidden_size=8, max_position_embeddings=32,
                           hidden_dropout_prob=0,
                           attention_probs_dropout_prob=0,
                           num_feedforward_networks=2, **small)))
    # DINOv2: layer scale, its position embeddings interpolated (bicubic)
    # to the patch grid.
    yield ("dinov2", lambda: T.Dinov2ForImageClassification(T.Dinov2Config(
        image_size=IMAGE, patch_size=PATCH, hidden_size=16,
        num_hidden_layers=2, num_attention_heads=2, mlp_ratio=2,
        hidden_dropout_prob=0, attention_probs_dropout_prob=0,
        drop_path_rate=0, num_labels=CLASSES)),
        VIT_INPUTS, "class_labels", CLASSES)
    # SegFormer's encoder (MiT) with a class head: overlapping patch
    # embeddings, keys and values from a strided conv of the sequence,
    # depthwise convs in the MLP.
    yield ("segformer", lambda: T.SegformerForImageClassification(
        T.SegformerConfig(num_channels=3, num_encoder_blocks=2,
                          depths=[1, 1], sr_ratios=[2, 1],
                          hidden_sizes=[8, 16], patch_sizes=[3, 3],
                          strides=[2, 2], num_attention_heads=[1, 2],
                          mlp_ratios=[2, 2], hidden_dropout_prob=0,
                          attention_probs_dropout_prob=0, drop_path_rate=0,
                          classifier_dropout_prob=0, num_labels=CLASSES)),
        VIT_INPUTS, "class_labels", CLASSES)
    # Hugging Face's ResNet: BatchNorms in train() mode (the plain exports
    # fold them into the convs: refused; hfresnet_noopt.onnx trains).
    yield ("hfresnet", lambda: T.ResNetForImageClassification(T.ResNetConfig(
        num_channels=3, embedding_size=8, hidden_sizes=[8, 16],
        depths=[1, 1], layer_type="basic", num_labels=CLASSES)),
        VIT_INPUTS, "class_labels", CLASSES)
    # ALBERT: one layer's parameters shared by all 3 layers (a weight read
    # by every pipeline stage), embeddings narrower than the hidden size.
    yield lm("albert", lambda: T.AlbertForMaskedLM(T.AlbertConfig(
        num_hidden_layers=3, num_attention_heads=2, hidden_size=16,
        embedding_size=8, intermediate_size=32, max_position_embeddings=32,
        hidden_dropout_prob=0, attention_probs_dropout_prob=0,
        classifier_dropout_prob=0, **small)))
    # DeepSeek-V3: multi-head latent attention (low-rank queries and
    # key-values, a rotary part of each head apart), a dense first layer,
    # then 4 routed experts (sigmoid scores, top 2) and a shared one;
    # batched_mm as Mixtral's.
    yield lm("deepseekv3", lambda: T.DeepseekV3ForCausalLM(T.DeepseekV3Config(
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
        hidden_size=16, intermediate_size=32, moe_intermediate_size=16,
        n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2,
        n_group=1, topk_group=1, first_k_dense_replace=1, q_lora_rank=8,
        kv_lora_rank=8, qk_rope_head_dim=4, qk_nope_head_dim=4,
        v_head_dim=4, max_position_embeddings=32,
        experts_implementation="batched_mm", **small)))
    # Marian (opus-mt): BART-like, its encoder's and decoder's sinusoidal
    # position tables parameters PyTorch does not train; the plain exports
    # merge their two gathers (refused), marian_noopt.onnx trains.
    yield ("marian", lambda: T.MarianMTModel(T.MarianConfig(
        encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
        decoder_attention_heads=2, d_model=16, encoder_ffn_dim=32,
        decoder_ffn_dim=32, max_position_embeddings=32, dropout=0,
        attention_dropout=0, activation_dropout=0, decoder_start_token_id=0,
        pad_token_id=1, **small)), T5_INPUTS, "labels", VOCAB)
    # BiT: weight-standardised convs (each weight normalised by batch_norm
    # in the forward: the plain exports fold it, refused; bit_noopt.onnx
    # trains), GroupNorms, "SAME" padding.
    yield ("bit", lambda: T.BitForImageClassification(T.BitConfig(
        embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
        layer_type="preactivation", global_padding="SAME", num_groups=2,
        num_labels=CLASSES)), VIT_INPUTS, "class_labels", CLASSES)
    # Funnel Transformer: pooled blocks, relative attention with a
    # relative shift (reshapes of [batch, heads, 2T, T]), r_w_bias-style
    # parameters scaled in the forward (the plain exports fold the pads of
    # its position encodings with its parameters, refused;
    # funnel_noopt.onnx trains).
    yield lm("funnel", lambda: T.FunnelForMaskedLM(T.FunnelConfig(
        block_sizes=[1, 1], num_decoder_layers=1, n_head=2, d_model=16,
        d_head=8, d_inner=32, hidden_dropout=0, attention_dropout=0,
        activation_dropout=0, **small)))


class LogitsOnly(torch.nn.Module):
    """input_ids -> logits (the LMs)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        kw = {} if self.model.config.model_type in (
            "bert", "distilbert", "roberta", "deberta-v2") else {
                "use_cache": False}
        return self.model(input_ids=input_ids, return_dict=False, **kw)[0]


class Seq2SeqLogits(LogitsOnly):
    """input_ids, decoder_input_ids -> the decoder's logits (T5)."""

    def forward(self, input_ids, decoder_input_ids):
        return self.model(input_ids=input_ids,
                          decoder_input_ids=decoder_input_ids,
                          use_cache=False, return_dict=False)[0]


class ImageLogits(LogitsOnly):
    """pixel_values -> class logits (ViT)."""

    def forward(self, pixel_values):
        return self.model(pixel_values=pixel_values, return_dict=False)[0]


class AudioLogits(LogitsOnly):
    """input_values (raw audio) -> class logits (Data2VecAudio)."""

    def forward(self, input_values):
        return self.model(input_values=input_values, return_dict=False)[0]


class MaskedLogits(LogitsOnly):
    """input_ids, attention_mask -> logits."""

    def forward(self, input_ids, attention_mask):
        kw = {} if self.model.config.model_type == "bert" else {
            "use_cache": False}
        return self.model(input_ids=input_ids, attention_mask=attention_mask,
                          return_dict=False, **kw)[0]


WRAPPERS = {IDS: LogitsOnly, T5_INPUTS: Seq2SeqLogits,
            MASK_INPUTS: MaskedLogits,
            VIT_INPUTS: ImageLogits, AUDIO_INPUTS: AudioLogits}


def data(out):
    """The shared inputs and labels (16 samples), written to `out`."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (SAMPLES, SEQ), generator=g)
    labels = torch.randint(0, VOCAB, (SAMPLES, SEQ), generator=g)
    # T5's decoder input: the labels shifted right after the start token 0.
    dec = torch.cat([torch.zeros(SAMPLES, 1, dtype=torch.long),
                     labels[:, :-1]], dim=1)
    g2 = torch.Generator().manual_seed(2)
    pixels = torch.randn(SAMPLES, 3, IMAGE, IMAGE, generator=g2)
    classes = torch.randint(0, CLASSES, (SAMPLES,), generator=g2)
    # Left padding: sample i keeps its last 3..8 tokens.
    g3 = torch.Generator().manual_seed(3)
    lengths = torch.randint(3, SEQ + 1, (SAMPLES,), generator=g3)
    mask = (torch.arange(SEQ)[None, :] >= (SEQ - lengths)[:, None]).long()
    g5 = torch.Generator().manual_seed(5)
    audio = torch.randn(SAMPLES, AUDIO, generator=g5)
    t = {"input_ids": ids, "labels": labels, "decoder_input_ids": dec,
         "input_values": audio,
         "pixel_values": pixels, "class_labels": classes,
         "attention_mask": mask,
         "labels_pad": labels.masked_fill(mask == 0, -100),
         "seq_labels": torch.randint(0, SEQ_CLASSES, (SAMPLES,),
                                     generator=g3)}
    (out / "forward").mkdir(exist_ok=True)
    for name, v in t.items():
        np.save(out / f"{name}.npy", v.numpy())
        if name in IDS + T5_INPUTS + VIT_INPUTS + MASK_INPUTS + AUDIO_INPUTS:
            np.save(out / "forward" / f"{name}.npy", v[:BATCH].numpy())
    return t


# Also exported with optimize=False: the plain and dyn exports of these are
# refused (the optimiser folds a parameter's value away).
NOOPT = ("t5", "gemma", "swin", "gemma2", "mobilebert", "hfresnet", "marian",
         "bit", "funnel")

# Exported at the newest opsets smpc reads as well (test/smprun/opsets.test).
OPSET_EXPORTS = ("gpt2", "llama")


def export_opset(model, example, names, out, name, batch):
    """<name>_op25.onnx: the dyn export at opset_version=25 (torch 2.15's
    highest for these: at 26 its converter fails on Attention and it writes
    opset 18 instead, printing the error); gpt2_op26.onnx: that file taken
    to opset 26 by onnx's version converter (what torch falls back to)."""
    from onnx import version_converter
    path = out / f"{name}_op25.onnx"
    torch.onnx.export(model, example, str(path), input_names=list(names),
                      output_names=["logits"],
                      dynamic_shapes={n: {0: batch} for n in names},
                      opset_version=25, external_data=False)
    torch_refs.strip_stack_traces(path)
    files = [(path, 25)]
    if name == "gpt2":
        up = out / f"{name}_op26.onnx"
        onnx.save(version_converter.convert_version(onnx.load(str(path)), 26),
                  str(up))
        files.append((up, 26))
    for f, opset in files:
        got = {o.domain or "ai.onnx": o.version
               for o in onnx.load(str(f)).opset_import}
        assert got.get("ai.onnx") == opset, (f, got)


def main():
    ap = torch_refs.fixture_arguments("real")
    ap.add_argument("--only", nargs="*", help="only these architectures (for debugging)")
    args = ap.parse_args()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    warnings.filterwarnings("ignore")
    t = data(out)
    for name, build, names, label, classes in configs():
        if args.only and name not in args.only:
            continue
        torch.manual_seed(0)
        model = WRAPPERS[names](build()).eval()
        init = {k: v.clone() for k, v in model.state_dict().items()}
        inputs = tuple(t[n] for n in names)
        example = tuple(v[:BATCH] for v in inputs)
        torch.onnx.export(model, example, str(out / f"{name}.onnx"),
                          input_names=list(names), output_names=["logits"],
                          external_data=False)
        batch = torch.export.Dim("batch")
        torch.onnx.export(model, example, str(out / f"{name}_dyn.onnx"),
                          input_names=list(names), output_names=["logits"],
                          dynamic_shapes={n: {0: batch} for n in names},
                          external_data=False)
        if name in NOOPT:
            # What smpc's refusal of the two exports above names as the fix:
            # optimize=False keeps the relative position bias a gather of
            # its parameter (the optimiser folds it). Stack traces dropped
            # (they would make the file 1.4 MB).
            noopt = out / f"{name}_noopt.onnx"
            torch.onnx.export(model, example, str(noopt),
                              input_names=list(names), output_names=["logits"],
                              dynamic_shapes={n: {0: batch} for n in names},
                              optimize=False, external_data=False)
            torch_refs.strip_stack_traces(noopt)
        if name in OPSET_EXPORTS:
            export_opset(model, example, names, out, name, batch)
        # Stack traces dropped (the files would be 2-3 times as large; smp
        # does not read them).
        for f in (f"{name}.onnx", f"{name}_dyn.onnx"):
            torch_refs.strip_stack_traces(out / f)
        (out / name).mkdir(exist_ok=True)
        with torch.no_grad():
            np.save(out / name / "logits.npy", model(*example).numpy())
        for opt_name, lr in torch_refs.LRS.items():
            model.load_state_dict(init)
            losses, norms = torch_refs.train_steps(model, inputs, t[label],
                                                   classes, opt_name, STEPS,
                                                   BATCH)
            torch_refs.write_ref(out / name / f"ref_{opt_name}.json",
                                 {"name": opt_name, "optimizer": opt_name,
                                  "lr": lr, "batch_size": BATCH,
                                  "steps": STEPS, "samples": SAMPLES},
                                 losses, norms)
        print("wrote", name)


if __name__ == "__main__":
    main()
