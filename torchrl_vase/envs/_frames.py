"""``rgb_array`` frames of 2D worlds: shapes in world units on an off-screen pygame surface.

Used by the Box2D tasks (their bodies' fixtures) and the point robot. pygame comes with
gymnasium's ``box2d`` extra; no display is needed.

Examples:
    >>> canvas = Canvas(view=(-1.0, 1.0, -1.0, 1.0), size=(40, 40))
    >>> canvas.circle((0.0, 0.0), 0.5, GOAL)
    >>> frame = canvas.frame()
    >>> frame.shape, frame[20, 20].tolist(), frame[1, 1].tolist()
    ((40, 40, 3), [0, 160, 0], [255, 255, 255])
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

import numpy as np

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
import pygame

Colour = tuple[int, int, int]
BODIES: tuple[Colour, ...] = ((70, 110, 170), (230, 140, 30))  # moving bodies, in turn
GROUND: Colour = (90, 90, 90)
GOAL: Colour = (0, 160, 0)
AGENT: Colour = (200, 0, 0)
TEXT: Colour = (0, 0, 0)


@functools.cache
def _font(size: int) -> pygame.font.Font:
    """pygame's default font at ``size`` px, loaded once (a video draws hundreds of frames)."""
    pygame.font.init()
    return pygame.font.Font(None, size)


class Canvas:
    """A frame of ``size`` pixels (width, height) showing ``view`` = (x_min, x_max, y_min,
    y_max) of the world, y up; white background."""

    def __init__(self, view: tuple[float, float, float, float], size: tuple[int, int]) -> None:
        x_min, x_max, y_min, y_max = view
        if not (x_max > x_min and y_max > y_min):
            raise ValueError(f"view must be (x_min, x_max, y_min, y_max), increasing: {view}.")
        self.view, self.size = view, size
        self.surface = pygame.Surface(size)
        self.surface.fill((255, 255, 255))
        self.scale = (size[0] / (x_max - x_min), size[1] / (y_max - y_min))

    def pixel(self, point: Sequence[float]) -> tuple[float, float]:
        """Where a world point is drawn (column, row)."""
        x_min, _, _, y_max = self.view
        return ((point[0] - x_min) * self.scale[0], (y_max - point[1]) * self.scale[1])

    def polygon(self, points: Sequence[Sequence[float]], colour: Colour) -> None:
        pygame.draw.polygon(self.surface, colour, [self.pixel(p) for p in points])

    def line(self, points: Sequence[Sequence[float]], colour: Colour, width: int = 2) -> None:
        pygame.draw.lines(self.surface, colour, False, [self.pixel(p) for p in points], width)

    def circle(self, centre: Sequence[float], radius: float, colour: Colour, *,
               min_pixels: float = 3.0, width: int = 0) -> None:
        """A disc (``width`` 0) or a ring of ``radius`` world units, at least ``min_pixels``."""
        pixels = max(min_pixels, radius * self.scale[0])
        pygame.draw.circle(self.surface, colour, self.pixel(centre), pixels, width)

    def text(self, label: str, at: Sequence[float], colour: Colour = TEXT, size: int = 24,
             *, pixels: bool = False) -> None:
        """``label`` with its top-left corner at a world point (or at pixel ``at``)."""
        image = _font(size).render(label, True, colour)
        self.surface.blit(image, at if pixels else self.pixel(at))

    def frame(self) -> np.ndarray:
        """The ``(height, width, 3)`` uint8 image."""
        return np.ascontiguousarray(pygame.surfarray.array3d(self.surface).transpose(1, 0, 2))


def draw_bodies(canvas: Canvas, world) -> None:
    """Every fixture of every body of a Box2D ``world`` (polygons filled, chains and edges as lines,
    circles as discs), static bodies underneath, moving ones coloured in turn from ``BODIES``."""
    import Box2D

    static = [body for body in world.bodies if body.type == Box2D.b2_staticBody]
    moving = [body for body in world.bodies if body.type != Box2D.b2_staticBody]  # created order
    painted = [(body, GROUND) for body in static] + [
        (body, BODIES[i % len(BODIES)]) for i, body in enumerate(moving)]
    for body, colour in painted:
        transform = body.transform
        for fixture in body.fixtures:
            shape = fixture.shape
            if isinstance(shape, Box2D.b2PolygonShape):
                canvas.polygon([transform * v for v in shape.vertices], colour)
            elif isinstance(shape, (Box2D.b2ChainShape, Box2D.b2EdgeShape)):
                canvas.line([transform * v for v in shape.vertices], colour, width=3)
            elif isinstance(shape, Box2D.b2CircleShape):
                canvas.circle(transform * shape.pos, shape.radius, colour)
