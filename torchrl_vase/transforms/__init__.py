"""TorchRL transforms that add exploration bonuses to rewards."""

from torchrl_vase.transforms.forward_bonus import DisagreementRewardTransform, ICMRewardTransform
from torchrl_vase.transforms.intrinsic import (
                                               REWARD_NORMALIZATIONS,
                                               IntrinsicRewardTransform,
                                               RecentMedianNormalizer,
)
from torchrl_vase.transforms.rnd import RNDRewardTransform
from torchrl_vase.transforms.surprise_reward import (
                                               MEASURES,
                                               ModelBonusTransform,
                                               NLLRewardTransform,
                                               SurpriseRewardTransform,
                                               VASERewardTransform,
                                               VIMERewardTransform,
)

__all__ = ["MEASURES", "REWARD_NORMALIZATIONS", "DisagreementRewardTransform", "ICMRewardTransform",
           "IntrinsicRewardTransform", "ModelBonusTransform", "NLLRewardTransform",
           "RNDRewardTransform", "RecentMedianNormalizer", "SurpriseRewardTransform",
           "VASERewardTransform", "VIMERewardTransform"]
