"""What SWE is made of: contextual extraction, sentence-level PCA (ABTT), distillation and contrastive
training, the cross-lingual merge. A stage imports machinery, never a method."""
