"""``sg.conv``, ``nn.Conv2d`` and the pools: values against a direct loop over every output
entry (numpy), and values and gradients against PyTorch's, written in below (computed once
with torch 2.13 in float64 on the same inputs: no torch at test time)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import simplegrad as sg


def _xs(shape, a=0.7, b=0.3):
    return np.sin(np.arange(int(np.prod(shape))) * a + b).reshape(shape)


def _loop_conv(x, w, stride, padding, dilation, groups):
    """The definition: out[n, o, p] = sum over c, k of xpad[n, g c, p s + k d] w[o, c, k]."""
    d = x.ndim - 2
    x = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    ks = w.shape[2:]
    outs = [(x.shape[2 + i] - dilation[i] * (ks[i] - 1) - 1) // stride[i] + 1 for i in range(d)]
    y = np.zeros([n, o] + outs)
    for b, f in itertools.product(range(n), range(o)):
        gi = f // (o // groups)
        for p in itertools.product(*[range(m) for m in outs]):
            for ci in range(cg):
                for k in itertools.product(*[range(m) for m in ks]):
                    at = tuple(p[i] * stride[i] + k[i] * dilation[i] for i in range(d))
                    y[(b, f) + p] += x[(b, gi * cg + ci) + at] * w[(f, ci) + k]
    return y


@pytest.mark.parametrize("xs, ws, stride, padding, dilation, groups", [
    ((2, 3, 7), (4, 3, 3), 1, 0, 1, 1),
    ((1, 4, 9), (6, 2, 2), 2, 1, 3, 2),
    ((2, 2, 5, 6), (3, 2, 2, 3), (2, 1), (1, 2), (1, 2), 1),
    ((1, 4, 5, 5), (4, 1, 3, 3), 1, 1, 1, 4),
    ((1, 2, 3, 4, 4), (2, 1, 2, 2, 3), (1, 2, 1), (1, 0, 1), 1, 2),
], ids=lambda v: str(v))
def test_conv_is_the_loop_of_its_definition(xs, ws, stride, padding, dilation, groups, rng):
    x, w = rng.normal(size=xs), rng.normal(size=ws)
    d = len(xs) - 2
    per = [(v,) * d if isinstance(v, int) else v for v in (stride, padding, dilation)]
    want = _loop_conv(x, w, *per, groups)
    np.testing.assert_allclose(sg.conv(x, w, stride, padding, dilation, groups), want,
                               rtol=1e-12, atol=1e-12)
    op = sg.Ops()
    got = op.conv(op.var(x), op.var(w), stride, padding, dilation, groups)
    np.testing.assert_allclose(got.value, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("chunk, wide", [(1 << 20, 1 << 16), (1, 0), (40, 0), (300, 1 << 30)],
                         ids=["default", "one-at-a-time-along-outputs", "chunks-along-outputs",
                              "chunks-along-kernels"])
@pytest.mark.parametrize("xs, ws, stride, padding, dilation, groups", [
    ((3, 2, 7, 6), (4, 2, 2, 3), (1, 2), (1, 0), (2, 1), 1),
    ((2, 6, 6, 5), (6, 2, 3, 2), 1, 1, 1, 3),
    ((3, 4, 9), (4, 1, 2), 2, 2, 1, 4),
], ids=["2d-strided", "2d-groups", "1d-depthwise"])
def test_every_split_and_layout_of_the_windows_is_the_loop(xs, ws, stride, padding, dilation,
                                                           groups, chunk, wide, monkeypatch, rng):
    # the forward copies the windows a few groups (or examples) at a time, with rows along the
    # outputs or along the kernel: each way gives the definition's values and gradients (the
    # vjps are convolutions too, split the same way)
    from simplegrad.primitives import conv as module
    monkeypatch.setattr(module, "_CHUNK", chunk)
    monkeypatch.setattr(module, "_WIDE", wide)
    x, w = rng.normal(size=xs), rng.normal(size=ws)
    d = len(xs) - 2
    per = [(v,) * d if isinstance(v, int) else v for v in (stride, padding, dilation)]
    np.testing.assert_allclose(sg.conv(x, w, stride, padding, dilation, groups),
                               _loop_conv(x, w, *per, groups), rtol=1e-12, atol=1e-12)
    grads = sg.grad(lambda x, w: (sg.conv(x, w, stride, padding, dilation, groups) ** 2).sum(),
                    argnums=(0, 1))(x, w)

    def loss(x, w):
        return (_loop_conv(x, w, *per, groups) ** 2).sum()
    for which, g in enumerate(grads):       # central differences at three entries of each
        for _ in range(3):
            k = tuple(rng.integers(0, n) for n in g.shape)
            step = [np.zeros_like(x), np.zeros_like(w)]
            step[which][k] = 1e-6
            fd = (loss(x + step[0], w + step[1]) - loss(x - step[0], w - step[1])) / 2e-6
            np.testing.assert_allclose(g[k], fd, rtol=1e-6, atol=1e-8)


def test_same_and_valid_padding(rng):
    x, w = rng.normal(size=(1, 2, 8)), rng.normal(size=(3, 2, 4))
    same = sg.conv(x, w, padding="same", dilation=2)    # total 6: 3 before, 3 after
    assert same.shape == (1, 3, 8)
    np.testing.assert_allclose(same, _loop_conv(x, w, (1,), (3,), (2,), 1), rtol=1e-12)
    np.testing.assert_array_equal(sg.conv(x, w, padding="valid"), sg.conv(x, w))
    even = rng.normal(size=(3, 2, 3, 2))    # 'same' with an even kernel: one more after
    y = sg.conv(rng.normal(size=(1, 2, 5, 4)), even, padding="same")
    assert y.shape == (1, 3, 5, 4)


TORCH = {'1d_groups_same': ((2, 4, 6), (4, 2, 3), {'groups': 2, 'padding': 'same'},
                    [[[[2.497228621, 2.8103660813, 1.7052265127, -0.2019077298, -2.0140816121,
                        -1.6209203301],
                       [2.1589782173, 3.0024372764, 2.2751761444, 0.4778641211, -1.5441948652,
                        -1.9701182719],
                       [0.2229727425, -0.9678266985, -2.5441972871, -2.9239921375, -1.9285877969,
                        -0.2720267214],
                       [0.4679263922, -0.2520467789, -1.979175562, -2.7754671529, -2.2664131739,
                        -0.5247039424]],
                      [[-2.1784635276, -0.682598902, 1.2895096977, 2.6551417374, 2.7720191302,
                        1.3231488835],
                       [-2.1130996274, -1.3539303459, 0.6909827877, 2.4109159194, 2.9969576226,
                        1.96209357],
                       [1.6853182854, 2.931255627, 2.5196047807, 0.9229444361, -1.1077910981,
                        -2.2265219491],
                       [0.964096944, 2.5773137643, 2.6500774034, 1.4764682311, -0.3915470207,
                        -2.1859149578]]],
                     [[[38.916511033, 75.9835546397, 58.3086487668, 19.1507720646, 22.0417897683,
                        32.5542846452],
                       [-47.8976767917, -77.5598537292, -53.0406804968, -19.1315758081,
                        -25.6994273465, -30.947381966],
                       [2.548758139, 24.0405475173, 64.4273164914, 70.7391749217, 33.0554212259,
                        4.197704172],
                       [-2.8399222269, -27.0740130903, -67.1959820459, -65.574152556,
                        -23.8374165051, 0.0287716987]],
                      [[27.638579104, 26.4722601167, 15.6405529681, 49.3452432844, 78.0676145153,
                        50.4919812071],
                       [-29.6801677493, -24.3399164182, -20.9529540678, -57.6916015448,
                        -77.756832531, -44.9274715268],
                       [42.3583160046, 74.0921609719, 51.9559624192, 16.4640568507, 25.2268394263,
                        28.5044733026],
                       [-46.5113436997, -73.6871017702, -43.1910633495, -10.0403746634,
                        -26.5727454954, -26.0977996052]]],
                     [[[22.538174725, 45.3822797638, 67.6097851295],
                       [-60.6012013183, -60.8646597007, -42.1750480627]],
                      [[33.7005601408, 58.2118534298, 73.3590469384],
                       [-72.6492592507, -62.1125142736, -38.853921659]],
                      [[5.5316408323, -11.0308285719, -5.1265153493],
                       [22.2089172773, 20.7404012668, 6.3547705464]],
                      [[2.0753916967, -9.683383272, -2.7134833262],
                       [16.1746652327, 17.2222931932, 4.3078973848]]]]),
 '2d': ((1, 2, 4, 5), (2, 2, 2, 3), {'dilation': (1, 2), 'padding': 1, 'stride': (2, 1)},
        [[[[[-1.6406704664, -1.0365885284, -0.4349401831],
            [-1.5107286107, 0.5305308595, 1.2287921592],
            [0.4130278302, 1.5043390932, 1.372868246]],
           [[-1.5276479043, -2.2110475447, -1.3094228485],
            [-2.4890727238, -2.8812824197, -0.3836807625],
            [-0.454747865, -0.1681057412, 0.9670584015]]]],
         [[[[-10.9476824401, -18.078324413, -16.9834715567, -12.1613650436, -4.4595912128],
            [14.7458070768, 24.7040761079, 25.3284417582, 15.6423636876, 8.2319588097],
            [-17.8604725826, -25.1800795376, -24.4348409902, -12.3297277203, -4.3066256191],
            [0.0501951759, 2.7294037899, 6.134160471, 8.4094681329, 5.5146676197]],
           [[-14.6038799748, -18.5633062308, -15.0042198683, -7.1648070529, 0.9921681003],
            [20.5279036357, 25.0255621883, 22.9293805594, 8.7083496969, 0.2734525411],
            [-22.6813065353, -24.2443932455, -20.8497578877, -4.8689105897, 3.7665679143],
            [2.1840702009, 5.10049828, 6.7839931719, 8.3702709703, 3.9703157802]]]],
         [[[[-16.5544057206, -10.1610695657, 3.703701083],
            [6.6298589591, 17.8213014481, 5.2305039122]],
           [[-2.4709584233, 13.550946075, 11.5123698599],
            [4.0480948029, -0.1659244733, -15.8075436507]]],
          [[[-18.2095897056, -39.9914157392, 1.0860112193],
            [30.279852863, 58.8207038891, -9.7682937915]],
           [[-20.7695530585, 5.6167113537, 41.2923648547],
            [33.6884498456, -15.4255575147, -58.6296194624]]]]]),
 '3d': ((1, 1, 3, 3, 4), (2, 1, 2, 2, 2), {'padding': (0, 1, 0), 'stride': (1, 1, 2)},
        [[[[[[0.3372132261, -0.4688593595], [-0.3950324186, 2.1889361805],
             [1.1391268758, -1.8017078996], [-1.120170586, 1.3243555653]],
            [[-0.6314185779, -0.1180728772], [2.161646008, -0.4714650962],
             [-2.3219131587, -0.3178327951], [1.8953071136, 0.4789162459]]],
           [[[-0.4905592484, -0.7866297627], [0.4279827098, -0.2045665818],
             [-0.4975219047, 0.0354418285], [0.864699109, -0.5801829029]],
            [[-0.3551293116, 0.7179613196], [-0.4627341897, -0.295077633],
             [0.3624271853, 0.4182790594], [-1.0796282849, -0.5341175438]]]]],
         [[[[[-0.1247125433, -0.2126329808, -1.2497159199, 11.8143254161],
             [0.2633470861, 2.8086263204, 11.4982528686, 6.3533200818],
             [3.7167980242, 1.3805299689, 8.4604075492, 2.6893828649]],
            [[1.169370804, 11.875534904, -14.1959411688, -10.9145867285],
             [7.9693999823, 9.7915035014, -4.1637179725, 7.0550292966],
             [13.9115670675, 8.1514600586, -1.1533754474, 6.8424798576]],
            [[-12.4720522064, -8.3438794888, 0.0018661662, -1.2721039156],
             [-10.5958046666, 2.3726022354, 0.3093028654, 0.7771338968],
             [-3.0263781349, 11.5492239294, 0.1054543314, 0.284924816]]]]],
         [[[[[13.5585662591, 6.2248385016], [-1.7752842217, 4.458701111]],
            [[-12.539867265, -14.9030371856], [8.6378885354, 4.5635508592]]]],
          [[[[3.8810812189, 3.5846909798], [0.8803594151, 0.0574258987]],
            [[-1.197868658, -3.3729262542], [-1.2742076387, -1.1394124986]]]]]])}
POOL = [[[[[0.8414709848, 0.9916648105, 0.9893582466], [0.8591618149, 0.9867719643, 0.9893582466],
    [0.8591618149, 0.9867719643, 0.9839066946]],
   [[0.8758810798, 0.9807632477, 0.6243771354], [0.8758810798, 0.9807632477, 0.9773425124],
    [0.891609873, 0.9736454557, 0.5977603669]]]],
 [[[[0.5684955957, 0.8361996586, 0.035061984], [-0.1809983955, 0.2604681698, 0.3760870305],
    [-0.2933100295, -0.4211702351, -0.0105469094], [0.4685952274, 0.152498361, -0.3657455576],
    [-0.1661577326, 0.2716422917, 0.3691683443], [-0.9256335923, -0.2887892897, 0.731621908]],
   [[0.3142856434, -0.5489097244, -0.7240858956], [0.4658776802, 0.139048715, -0.3728629559],
    [-0.1511291738, 0.2825092326, 0.3618321918], [-0.3176922544, -0.4160551318, 0.0180786608],
    [0.462633305, 0.1254418287, -0.37955871], [0.6409230542, 0.8210052319, -0.0499703418]]]],
 [[[[0.477996398, 2.1222855603, 1.6442891623, 0.7930261618, 0.1487369995, 0.1487369995],
    [-0.2371542125, -0.2907215676, -0.0535673551, 0.0682793519, 0.121846707, 2.121846707],
    [0.087642599, -0.0019146924, -0.0895572914, -0.2149881137, -0.1254308223, -0.1254308223],
    [0.1512187474, 2.2925989649, 2.1413802176, 0.1425211465, 0.0011409289, 0.0011409289],
    [-1.0087124586, -1.1106912212, -0.1019787626, 0.5088252909, 0.6108040534, 1.6108040534]],
   [[0.5472244835, 0.2276342389, -0.3195902446, -0.926601827, -0.6070115824, -0.6070115824],
    [0.1573742532, 2.297893569, 2.1405193159, 1.1368423945, -0.0036769214, -0.0036769214],
    [-0.2344107141, -0.2789260138, -0.0445152997, 0.0821216511, 0.1266369509, 1.1266369509],
    [0.0724705253, -0.0244005758, -0.096871101, -0.2173644508, -0.1204933497, -0.1204933497],
    [0.8722397067, 2.4613904708, 1.5891507641, 1.4293176329, -0.1598331312, -0.1598331312]]]]]


@pytest.mark.parametrize("name", list(TORCH))
def test_values_and_gradients_are_torchs(name):
    xs, ws, kw, (y_t, gx_t, gw_t) = TORCH[name]
    x, w = _xs(xs), _xs(ws, 1.1, 0.0)

    def f(x, w):
        return (sg.conv(x, w, **kw) ** 3).sum()
    np.testing.assert_allclose(sg.conv(x, w, **kw), y_t, atol=1e-9)
    gx, gw = sg.grad(f, argnums=(0, 1))(x, w)
    np.testing.assert_allclose(gx, gx_t, atol=1e-9)
    np.testing.assert_allclose(gw, gw_t, atol=1e-9)


def test_pools_are_torchs():
    m_t, a_t, g_t = POOL
    x = _xs((1, 2, 5, 6))

    def f(x):
        m = sg.nn.max_pool2d(x, 3, stride=2, padding=1)
        a = sg.nn.avg_pool2d(x, (2, 3), stride=(1, 2), padding=(1, 1), count_include_pad=False)
        return m.sum() + (a ** 2).sum()
    np.testing.assert_allclose(sg.nn.max_pool2d(x, 3, stride=2, padding=1), m_t, atol=1e-9)
    np.testing.assert_allclose(
        sg.nn.avg_pool2d(x, (2, 3), stride=(1, 2), padding=(1, 1), count_include_pad=False),
        a_t, atol=1e-9)
    np.testing.assert_allclose(sg.grad(f)(x), g_t, atol=1e-9)


def test_avg_pool_counts_the_padding_by_default(rng):
    x = rng.normal(size=(2, 4, 4))      # one image: (C, H, W)
    y = sg.nn.avg_pool2d(x, 2, padding=1)
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1)))
    want = np.stack([[[xp[c, 2 * i:2 * i + 2, 2 * j:2 * j + 2].mean() for j in range(3)]
                      for i in range(3)] for c in range(2)])
    np.testing.assert_allclose(y, want, rtol=1e-12)


def test_conv2d_layer_is_conv_plus_bias(rng):
    layer = sg.nn.Conv2d(3, 4, (3, 2), stride=2, padding=1, rng=rng)
    assert layer.weight.shape == (4, 3, 3, 2) and layer.bias.shape == (4,)
    bound = 1 / np.sqrt(3 * 3 * 2)      # PyTorch's initialisation bound
    assert np.abs(layer.weight.value).max() <= bound
    x = rng.normal(size=(2, 3, 6, 5))
    want = _loop_conv(x, layer.weight.value, (2, 2), (1, 1), (1, 1), 1) + \
        layer.bias.value[:, None, None]
    np.testing.assert_allclose(layer(x).value, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(layer(x[0]).value, want[0], rtol=1e-12, atol=1e-12)


def test_per_example_gradients_by_vmap_are_each_examples(rng):
    layer = sg.nn.Conv2d(2, 3, 3, padding=1, rng=rng)
    params = {k: v.value for k, v in layer.named_parameters()}
    xs = rng.normal(size=(4, 2, 5, 5))

    def loss(p, x):
        y = sg.nn.functional_call(layer, p, x[None])
        return (sg.nn.max_pool2d(y.tanh(), 2) ** 2).sum()
    per = sg.vmap(sg.grad(loss), in_axes=(None, 0))(params, xs)
    for i in range(4):
        one = sg.grad(loss)(params, xs[i])
        for k in params:
            np.testing.assert_allclose(per[k][i], one[k], rtol=1e-10, atol=1e-12)


def test_bad_arguments_are_refused(rng):
    x, w = rng.normal(size=(1, 4, 5)), rng.normal(size=(2, 2, 3))
    with pytest.raises(sg.ShapeError, match="groups"):
        sg.conv(x, w)
    with pytest.raises(sg.ArgumentError, match="stride 1"):
        sg.conv(x, w, stride=2, padding="same", groups=2)
    with pytest.raises(sg.ArgumentError, match="padding"):
        sg.conv(x, w, padding="full", groups=2)
    with pytest.raises(sg.ShapeError, match="does not fit"):
        sg.conv(x, rng.normal(size=(2, 2, 7)), groups=2)
