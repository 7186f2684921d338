"""The bundled images that real tokens are cut from (docs/science.md §9): their sizes and pools.

``digits`` are the 8x8 handwritten digits of :func:`sklearn.datasets.load_digits`; ``photos``
the two photographs of :func:`sklearn.datasets.load_sample_images` (decoding needs Pillow),
reduced 4x by block means and cut into non-overlapping 8x8 windows. Nothing is downloaded.

Both the configuration (which derives a real-token cell's d and T and checks that its n fits
in the pool) and the data generator (:mod:`attnsvm.gd.real_tokens`) read these facts here.
"""

from __future__ import annotations

import functools

import numpy as np

#: side of the images the tokens are cut from (pixels)
IMAGE_SIDE = 8
#: patch sides that tile an 8x8 image: 2 (T = 16) or 4 (T = 4); 1 would make d = 1 pixel
PATCHES = (2, 4)
#: the photographs are reduced by this factor (block means) before windows are cut
PHOTO_REDUCTION = 4
REAL_GENERATORS = ("digits", "photos")


def channels(generator: str) -> int:
    """Colour channels of a generator's pixels: 1 for digits, 3 (RGB) for photos."""
    return 3 if generator == "photos" else 1


def token_count(patch: int) -> int:
    """``T = (8 / patch)^2``: tokens of one image (docs/science.md §9)."""
    return (IMAGE_SIDE // patch) ** 2


def token_dim(generator: str, patch: int, positional: bool) -> int:
    """``d``: pixels of a patch (``patch^2`` per channel), plus ``T`` one-hot position dims."""
    return channels(generator) * patch**2 + (token_count(patch) if positional else 0)


@functools.lru_cache(maxsize=1)
def _digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits  # scikit-learn: real tokens only

    bunch = load_digits()
    return bunch.images[..., None] / 16.0, bunch.target  # (N, 8, 8, 1) in [0, 1]


@functools.lru_cache(maxsize=1)
def _photos() -> tuple[np.ndarray, ...]:
    """The two photographs reduced by block means, pixels in [0, 1], shape (H, W, 3) each."""
    from sklearn.datasets import load_sample_images  # scikit-learn and Pillow: photos only

    out = []
    for img in load_sample_images().images:
        r = PHOTO_REDUCTION
        h, w = (img.shape[0] // r) * r, (img.shape[1] // r) * r
        small = img[:h, :w].reshape(h // r, r, w // r, r, 3).mean(axis=(1, 3))
        out.append(small / 255.0)
    return tuple(out)


def pool_size(generator: str, digit_pos: int = 3, digit_neg: int = 8) -> tuple[int, int]:
    """Images (digits) or windows (photos) available for label +1 and for label -1."""
    if generator == "digits":
        target = _digits()[1]
        return int((target == digit_pos).sum()), int((target == digit_neg).sum())
    return tuple(_windows(p).shape[0] for p in _photos())  # type: ignore[return-value]


def _windows(photo: np.ndarray) -> np.ndarray:
    """Every non-overlapping 8x8 window of a photograph: (count, 8, 8, 3)."""
    s = IMAGE_SIDE
    h, w = photo.shape[0] // s, photo.shape[1] // s
    cut = photo[: h * s, : w * s].reshape(h, s, w, s, 3)
    return cut.transpose(0, 2, 1, 3, 4).reshape(h * w, s, s, 3)


def pools(generator: str, digit_pos: int, digit_neg: int) -> tuple[np.ndarray, np.ndarray]:
    """The images of label +1 and of label -1, each (count, 8, 8, channels), in [0, 1]."""
    if generator == "digits":
        images, target = _digits()
        return images[target == digit_pos], images[target == digit_neg]
    first, second = _photos()
    return _windows(first), _windows(second)
