"""Properties that hold for any input, checked on inputs hypothesis draws: the bonuses' invariants
(U ≥ 0 without the confidence term, U · σ_c² independent of σ_c, a permuted batch gets its
bonus permuted, a batch's bonus is its halves' bonuses concatenated), a checkpoint's exact round
trip and refusal of a changed byte, and the redaction of a tracking URI's password.

Each would fail on a wrong formula or a broken wiring: a bonus that mixed rows (a mean over the
batch, a normaliser by batch size), a σ_c applied once instead of squared, a sign flipped, a
checkpoint that lost a dtype or a key's order, a password left in a message. Few examples each
and no deadline: the suite runs on a loaded two-core machine."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchrl_vase import BayesianMLP, nll_surprise, vase_surprise
from torchrl_vase.checkpointing import Checkpointer, config_identity, content_digest
from torchrl_vase.tracking import redact

PROPERTY = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
OBS, ACT = 3, 2


def _model(sampling: str, seed: int) -> BayesianMLP:
    torch.manual_seed(seed)
    model = BayesianMLP(OBS + ACT, OBS, [8], torch.nn.Tanh, sampling=sampling, init_mean="normal",
                        dtype=torch.float64)
    with torch.no_grad():  # a posterior away from its initial value
        model.rho.add_(torch.randn_like(model.rho) - 1.0)
    return model


def _batch(rows: int, seed: int, scale: float) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    return tuple(scale * torch.randn(rows, dim, generator=generator, dtype=torch.float64)
                 for dim in (OBS, ACT, OBS))


def _same_draws(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


MEASURES = {"vase": vase_surprise, "nll": nll_surprise}
#: samplings whose draws are shared by a batch's rows (``local`` draws one per row, so a row's
#: bonus depends on its position: the properties below are not its)
SHARED = ("weights", "local_shared")
rows = st.integers(2, 40)
seeds = st.integers(0, 2**16)
scales = st.sampled_from([1e-3, 1.0, 30.0])


def each_bonus(**strategies):
    """A property of VASE's and NLL's bonus, for each sampling a batch shares, on drawn inputs."""
    def wrap(test):
        test = PROPERTY(given(**strategies)(test))
        return pytest.mark.parametrize("sampling", SHARED)(
            pytest.mark.parametrize("measure", list(MEASURES))(test))
    return wrap


@each_bonus(rows=rows, seed=seeds, scale=scales, num_samples=st.integers(1, 12))
def test_the_bonus_without_its_confidence_term_is_never_negative(measure, sampling, rows, seed,
                                                                 scale, num_samples):
    bonus = MEASURES[measure](_model(sampling, seed), *_batch(rows, seed, scale),
                              num_samples=num_samples, generator=_same_draws(seed))
    assert bonus.shape == (rows,) and bool(torch.isfinite(bonus).all())
    assert bool((bonus >= -1e-12).all()), bonus.min()


@pytest.mark.parametrize("sampling", SHARED)
@PROPERTY
@given(rows=rows, seed=seeds, sigma_c=st.floats(0.05, 20.0), other=st.floats(0.05, 20.0))
def test_vase_times_sigma_c_squared_does_not_depend_on_sigma_c(sampling, rows, seed, sigma_c,
                                                               other):
    model, batch = _model(sampling, seed), _batch(rows, seed, 1.0)
    at = {s: vase_surprise(model, *batch, sigma_c=s, generator=_same_draws(seed)) * s**2
          for s in (sigma_c, other)}
    torch.testing.assert_close(at[sigma_c], at[other], rtol=1e-10, atol=0)


@each_bonus(data=st.data(), rows=rows, seed=seeds)
def test_a_permuted_batch_gets_its_bonus_permuted(measure, sampling, data, rows, seed):
    model, batch = _model(sampling, seed), _batch(rows, seed, 1.0)
    order = torch.tensor(data.draw(st.permutations(range(rows))))
    bonus = MEASURES[measure](model, *batch, generator=_same_draws(seed))
    permuted = MEASURES[measure](model, *(part[order] for part in batch),
                                 generator=_same_draws(seed))
    torch.testing.assert_close(permuted, bonus[order], rtol=1e-12, atol=1e-12)


@each_bonus(data=st.data(), rows=rows, seed=seeds)
def test_a_batch_s_bonus_is_its_halves_bonuses_concatenated(measure, sampling, data, rows, seed):
    model, batch = _model(sampling, seed), _batch(rows, seed, 1.0)
    cut = data.draw(st.integers(1, rows - 1))
    whole = MEASURES[measure](model, *batch, generator=_same_draws(seed))
    halves = [MEASURES[measure](model, *(part[piece] for part in batch),
                                generator=_same_draws(seed))
              for piece in (slice(None, cut), slice(cut, None))]
    torch.testing.assert_close(torch.cat(halves), whole, rtol=1e-12, atol=1e-12)


# -- A checkpoint's round trip
DTYPES = [torch.float32, torch.float64, torch.int64, torch.int32, torch.uint8, torch.bool,
          torch.bfloat16]


@st.composite
def tensors(draw) -> torch.Tensor:
    shape = draw(st.lists(st.integers(0, 4), max_size=3))
    values = torch.Generator().manual_seed(draw(seeds))
    tensor = torch.randn(shape, generator=values, dtype=torch.float64) * 100
    return tensor.to(draw(st.sampled_from(DTYPES)))


plain = (st.none() | st.booleans() | st.integers(-2**62, 2**62) | st.text(max_size=8)
         | st.floats(allow_nan=False))
states = st.dictionaries(
    st.text(min_size=1, max_size=6),
    st.recursive(plain | tensors(), lambda children: st.lists(children, max_size=3)
                 | st.dictionaries(st.text(min_size=1, max_size=6), children, max_size=3),
                 max_leaves=8),
    min_size=1, max_size=4)


def _assert_same(loaded, saved) -> None:
    """Equal, tensors bit for bit with their dtype and shape, containers in their order."""
    assert type(loaded) is type(saved)
    if isinstance(saved, torch.Tensor):
        assert loaded.dtype == saved.dtype and loaded.shape == saved.shape
        assert torch.equal(loaded.view(-1).view(torch.uint8) if loaded.numel() else loaded,
                           saved.view(-1).view(torch.uint8) if saved.numel() else saved)
    elif isinstance(saved, dict):
        assert list(loaded) == list(saved)
        for key in saved:
            _assert_same(loaded[key], saved[key])
    elif isinstance(saved, list):
        assert len(loaded) == len(saved)
        for a, b in zip(loaded, saved, strict=True):
            _assert_same(a, b)
    else:
        assert loaded == saved or (isinstance(saved, float) and math.isnan(saved))


@PROPERTY
@given(state=states)
def test_a_checkpoint_loads_as_it_was_saved(tmp_path, state):
    checkpointer = Checkpointer(tmp_path / "run")
    checkpointer.save(state)
    loaded = checkpointer.load()
    _assert_same(loaded, state)
    assert content_digest(loaded) == content_digest(state)


@PROPERTY
@given(state=states, data=st.data())
def test_a_checkpoint_whose_tensor_changed_is_refused(tmp_path, state, data):
    state = {**state, "weights": torch.arange(6.0)}
    checkpointer = Checkpointer(tmp_path / "run")
    checkpointer.save(state)
    saved = torch.load(checkpointer.path, weights_only=True)
    saved["weights"][data.draw(st.integers(0, 5))] += 1.0  # the digest stays the old content's
    torch.save(saved, checkpointer.path)
    with pytest.raises(ValueError, match="does not match the digest"):
        checkpointer.load()


# -- Redaction
#: a password: any printable text but the characters that end a URI in running text
passwords = st.text(st.characters(codec="ascii", categories=["L", "N", "P", "S"],
                                  exclude_characters="'\"<>`"), min_size=1, max_size=16)
users = st.text(st.characters(codec="ascii", categories=["L", "N"]), max_size=8)
hosts = st.from_regex(r"[a-z][a-z0-9-]{0,10}(:[0-9]{2,5})?", fullmatch=True)
schemes = st.sampled_from(["http", "https", "postgresql", "postgresql+psycopg2", "mysql"])


@PROPERTY
@given(scheme=schemes, user=users, password=passwords, host=hosts,
       before=st.text(max_size=10), after=st.sampled_from(["", " (refused)", "' failed", "/db"]))
def test_redaction_hides_the_password_of_a_uri_in_any_text(scheme, user, password, host, before,
                                                           after):
    uri = f"{scheme}://{user}:{password}@{host}"
    text = f"{before} {uri}{after}"
    shown = redact(text)
    assert f"{scheme}://{user}:***@{host}" in shown
    assert f":{password}@" not in shown
    assert redact(shown) == shown  # redacting twice changes nothing more


@PROPERTY
@given(text=st.text(st.characters(exclude_characters=":"), max_size=40))
def test_text_without_a_uri_is_left_as_it_is(text):
    assert redact(text) == text


def _changes(node):
    """Every state one edit away from ``node``: a key renamed, a value, a list's element, a
    tensor's or an array's byte, a type changed (an int for a float of the same value)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield {**{k: v for k, v in node.items() if k != key}, key + "'": value}
            for changed in _changes(value):
                yield {**node, key: changed}
    elif isinstance(node, list):
        for i, value in enumerate(node):
            for changed in _changes(value):
                yield [*node[:i], changed, *node[i + 1:]]
    elif isinstance(node, torch.Tensor):
        if node.numel():
            flat = node.clone().reshape(-1)
            flat.view(torch.uint8)[0] ^= 1
            yield flat.reshape(node.shape)
        yield node.to(torch.float64 if node.dtype != torch.float64 else torch.float32)
    elif isinstance(node, np.ndarray):
        changed = node.copy()
        changed.reshape(-1).view(np.uint8)[0] ^= 1
        yield changed
    elif isinstance(node, bool) or node is None:
        yield "changed"
    elif isinstance(node, int):
        yield node + 1
        yield float(node)
    elif isinstance(node, float):
        yield math.nextafter(node, math.inf) if node != math.inf else -math.inf
        yield str(node)
    else:
        yield str(node) + "'"


@PROPERTY
@given(state=states, array=st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=4))
def test_the_digest_of_a_checkpoint_changes_with_any_edit_of_its_content(state, array):
    state = {**state, "array": np.array(array)}
    digest = content_digest(state)
    for changed in _changes(state):
        assert content_digest(changed) != digest, changed


@PROPERTY
@given(config=st.recursive(plain, lambda children: st.lists(children, max_size=3)
                           | st.dictionaries(st.text(min_size=1, max_size=4), children,
                                             max_size=3), max_leaves=8),
       data=st.data())
def test_a_config_s_identity_follows_its_values_not_its_keys_order(config, data):
    config = {"root": config, "seed": 0}
    reordered = dict(reversed(list(config.items())))
    assert config_identity(reordered) == config_identity(config)
    assert config_identity({**config, "seed": 1}) != config_identity(config)
    assert config_identity({**config, "seed": 1}, ignore=["seed"]) == config_identity(
        config, ignore=["seed"])
    listed = {**config, "layers": [{"width": 8}, {"width": 16}]}
    assert config_identity(listed) != config_identity(
        {**config, "layers": [{"width": 8}, {"width": 32}]})
