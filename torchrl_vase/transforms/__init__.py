"""TorchRL transforms that add surprise bonuses to rewards."""

from torchrl_vase.transforms.surprise_reward import (
    MEASURES,
    NLLRewardTransform,
    RecentMedianNormalizer,
    SurpriseRewardTransform,
    VASERewardTransform,
    VIMERewardTransform,
)

__all__ = [
    "MEASURES",
    "NLLRewardTransform",
    "RecentMedianNormalizer",
    "SurpriseRewardTransform",
    "VASERewardTransform",
    "VIMERewardTransform",
]
