# cython: boundscheck=False, wraparound=False, cdivision=True
# A small MLP's forward and backward passes and its policy head's sampling in one call
# each (native/ppo/mlp.c); puffercore.ppo.native_mlp binds them to a DefaultPolicy.
# Pointers into the arrays are taken once (set_parameters, set_gradients, a new row
# count), not per call: at collection's 128 rows, taking them per layer and call cost
# about as much as the arithmetic.
import numpy as np

from libc.stdint cimport int64_t
from libc.stdlib cimport calloc, free

cdef extern from "mlp.h":
    int MLP_LANES
    int MLP_TANH
    int MLP_RELU
    void mlp_linear_forward(const float* x, int stride, int inputs, const float* weight, const float* bias,
                            int outputs, float* out) nogil
    void mlp_linear_backward(const float* x, int stride, int inputs, const float* weight, int outputs,
                             const float* d_out, float* d_weight, float* d_bias, float* d_x) nogil
    int mlp_set_wide(int on) nogil
    int mlp_lanes() nogil
    void mlp_activate(float* h, int64_t n, int activation) nogil
    void mlp_activation_backward(float* d, const float* h, int64_t n, int activation) nogil
    void mlp_transpose_rows(const float* x, int rows, int features, int stride, float* x_t) nogil
    void mlp_sample_categorical(const float* logits, int stride, int rows, int actions, const float* uniforms,
                                int64_t* action, float* log_prob) nogil
    void mlp_sample_gaussian(const float* mean, int stride, int rows, int actions, const float* log_std,
                             const float* normals, float* action, float* log_prob) nogil

ACTIVATIONS = {"tanh": MLP_TANH, "relu": MLP_RELU}


def set_wide(bint on) -> bool:
    """Run the linear kernels in 16 lanes (where the CPU has AVX-512: the default there)
    or, `on` False, in 8; returns the setting before. Both give the same bits (the tests
    compare them)."""
    return bool(mlp_set_wide(on))


def lanes() -> int:
    """The lanes the linear kernels run now: 16 (AVX-512, unless set_wide(False)) or 8."""
    return mlp_lanes()


cdef float* address(array) except NULL:
    """The first element of a C-contiguous float32 array (checked by its owner)."""
    cdef const float[::1] flat = array.reshape(-1)
    return <float*>&flat[0]


cdef class MLP:
    """Linear layers with one activation between them (none after the last), float32.

        mlp = MLP([(w0, b0), (w1, b1)], "tanh")   # weights [outputs, inputs], biases [outputs]
        out = mlp.forward(x)                     # x [rows, inputs] -> [outputs, rows]
        mlp.set_gradients([(dw0, db0), (dw1, db1)])
        mlp.backward(d_out)                      # d loss / d out -> the gradients written

    The arrays are used in place, not copied: they may be views of torch parameters (and
    of an optimizer's gradient buffer), and the caller keeps them where they are or
    passes their new place to set_parameters / set_gradients. `backward` uses the
    activations of the last `forward`."""

    cdef readonly int layers, rows
    cdef int activation, stride
    cdef int* widths  # widths[0]: inputs; widths[i + 1]: layer i's outputs
    cdef float** weight
    cdef float** bias
    cdef float** hidden  # each layer's outputs, [width][stride]
    cdef float** d_weight
    cdef float** d_bias
    cdef float* inputs_t
    cdef float* d_in
    cdef float* d_out
    cdef list parameters, gradients, buffers  # the arrays behind the pointers, kept alive

    def __cinit__(self, list layers, str activation):
        count = len(layers)
        self.widths = <int*>calloc(count + 1, sizeof(int))
        self.weight = <float**>calloc(count, sizeof(float*))
        self.bias = <float**>calloc(count, sizeof(float*))
        self.hidden = <float**>calloc(count, sizeof(float*))
        self.d_weight = <float**>calloc(count, sizeof(float*))
        self.d_bias = <float**>calloc(count, sizeof(float*))
        if not (self.widths and self.weight and self.bias and self.hidden and self.d_weight and self.d_bias):
            raise MemoryError()
        self.rows = -1  # no forward yet

    def __dealloc__(self):
        free(self.widths)
        free(self.weight)
        free(self.bias)
        free(self.hidden)
        free(self.d_weight)
        free(self.d_bias)

    def __init__(self, list layers, str activation):
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        if not layers:
            raise ValueError("layers must hold at least one (weight, bias) pair")
        self.activation = ACTIVATIONS[activation]
        self.layers = len(layers)
        self.parameters = None
        self.gradients = None
        self.stride = 0
        self.set_parameters(layers)

    def set_parameters(self, list layers):
        """Point the layers at new arrays (of the shapes the first ones had)."""
        if len(layers) != self.layers:
            raise ValueError(f"layers must hold {self.layers} (weight, bias) pairs, got {len(layers)}")
        checked = []
        for index, (weight, bias) in enumerate(layers):
            weight, bias = _float_array(weight, 2, f"layers[{index}] weight"), _float_array(bias, 1, f"layers[{index}] bias")
            if bias.shape[0] != weight.shape[0]:
                raise ValueError(f"layers[{index}] bias must hold {weight.shape[0]} values (the weight's rows), "
                                 f"got {bias.shape[0]}")
            if index and weight.shape[1] != checked[index - 1][0].shape[0]:
                raise ValueError(f"layers[{index}] weight must take {checked[index - 1][0].shape[0]} inputs (the layer "
                                 f"before's outputs), got shape {weight.shape}")
            if self.parameters is not None and weight.shape != self.parameters[index][0].shape:
                raise ValueError(f"layers[{index}] weight must keep its shape {self.parameters[index][0].shape}, "
                                 f"got {weight.shape}")
            checked.append((weight, bias))
        self.widths[0] = checked[0][0].shape[1]
        for index, (weight, bias) in enumerate(checked):
            self.widths[index + 1] = weight.shape[0]
            self.weight[index] = address(weight)
            self.bias[index] = address(bias)
        self.parameters = checked

    cdef int _check_made(self) except -1:
        if self.parameters is None:  # made by __new__ without __init__
            raise RuntimeError("this MLP has no layers: make it with MLP(layers, activation)")
        return 0

    def set_gradients(self, list gradients):
        """The arrays `backward` writes: a (weight, bias) pair per layer, of the layers'
        shapes."""
        self._check_made()
        if len(gradients) != self.layers:
            raise ValueError(f"gradients must hold {self.layers} (weight, bias) pairs, got {len(gradients)}")
        checked = []
        for layer, (weight_gradient, bias_gradient) in enumerate(gradients):
            weight_gradient = _float_array(weight_gradient, 2, f"gradients[{layer}] weight", writable=True)
            bias_gradient = _float_array(bias_gradient, 1, f"gradients[{layer}] bias", writable=True)
            weight, bias = self.parameters[layer]
            if weight_gradient.shape != weight.shape or bias_gradient.shape != bias.shape:
                raise ValueError(f"gradients[{layer}] must match the layer's shapes {weight.shape} and {bias.shape}, "
                                 f"got {weight_gradient.shape} and {bias_gradient.shape}")
            checked.append((weight_gradient, bias_gradient))
        for layer, (weight_gradient, bias_gradient) in enumerate(checked):
            self.d_weight[layer] = address(weight_gradient)
            self.d_bias[layer] = address(bias_gradient)
        self.gradients = checked

    @property
    def inputs(self) -> int:
        return self.widths[0]

    @property
    def outputs(self) -> int:
        return self.widths[self.layers]

    cdef int _reserve(self, int rows) except -1:
        cdef int stride = (rows + MLP_LANES - 1) // MLP_LANES * MLP_LANES, layer
        self.rows = rows
        if stride == self.stride:
            return 0
        widest = max([self.widths[layer] for layer in range(self.layers + 1)])
        hidden = [np.zeros((self.widths[layer + 1], stride), np.float32) for layer in range(self.layers)]
        inputs_t, d_in, d_out = (np.zeros((width, stride), np.float32) for width in (self.inputs, widest, widest))
        for layer in range(self.layers):
            self.hidden[layer] = address(hidden[layer])
        self.inputs_t, self.d_in, self.d_out = address(inputs_t), address(d_in), address(d_out)
        self.buffers = [hidden, inputs_t, d_in, d_out]
        self.stride = stride
        return 0

    def forward(self, const float[:, ::1] x):
        """x: [rows, inputs] -> the last layer's outputs, [outputs, rows] (a new array)."""
        self._check_made()
        cdef int rows = x.shape[0], layer, r, j, stride, outputs = self.outputs
        if x.shape[1] != self.inputs:
            raise ValueError(f"x must have {self.inputs} columns (the first layer's inputs), got {x.shape[1]}")
        if rows < 1:
            raise ValueError("x must hold at least one row")
        self._reserve(rows)
        stride = self.stride
        result = np.empty((outputs, rows), np.float32)
        cdef float[:, ::1] out = result
        cdef const float* below = self.inputs_t
        with nogil:
            mlp_transpose_rows(&x[0, 0], rows, x.shape[1], stride, self.inputs_t)
            for layer in range(self.layers):
                mlp_linear_forward(below, stride, self.widths[layer], self.weight[layer], self.bias[layer],
                                   self.widths[layer + 1], self.hidden[layer])
                if layer < self.layers - 1:
                    mlp_activate(self.hidden[layer], <int64_t>self.widths[layer + 1] * stride, self.activation)
                below = self.hidden[layer]
            for j in range(outputs):
                for r in range(rows):
                    out[j, r] = below[j * stride + r]
        return result

    def sample_categorical(self, const float[::1] uniforms):
        """Actions ([rows], int64: indices into the last forward's logits) and their
        log-probabilities, one uniform in [0, 1) a row."""
        cdef int rows = self.rows
        cdef int64_t[::1] action_view
        cdef float[::1] log_prob_view
        if rows < 0:
            raise RuntimeError("sample_categorical needs a forward first")
        if uniforms.shape[0] != rows:
            raise ValueError(f"uniforms must hold {rows} values (the last forward's rows), got {uniforms.shape[0]}")
        action, log_prob = np.empty(rows, np.int64), np.empty(rows, np.float32)
        action_view, log_prob_view = action, log_prob
        mlp_sample_categorical(self.hidden[self.layers - 1], self.stride, rows, self.outputs, &uniforms[0],
                               &action_view[0], &log_prob_view[0])
        return action, log_prob

    def sample_gaussian(self, const float[::1] log_std, const float[:, ::1] normals):
        """Actions [rows, outputs] = the last forward's outputs (the means) + exp(log_std)
        * normals, and their log-densities [rows]."""
        cdef int rows = self.rows, actions = self.outputs
        cdef float[:, ::1] action_view
        cdef float[::1] log_prob_view
        if rows < 0:
            raise RuntimeError("sample_gaussian needs a forward first")
        if log_std.shape[0] != actions or normals.shape[0] != rows or normals.shape[1] != actions:
            raise ValueError(f"log_std must hold {actions} values and normals be [{rows}, {actions}], got "
                             f"{log_std.shape[0]} and [{normals.shape[0]}, {normals.shape[1]}]")
        action, log_prob = np.empty((rows, actions), np.float32), np.empty(rows, np.float32)
        action_view, log_prob_view = action, log_prob
        mlp_sample_gaussian(self.hidden[self.layers - 1], self.stride, rows, actions, &log_std[0], &normals[0, 0],
                            &action_view[0, 0], &log_prob_view[0])
        return action, log_prob

    def backward(self, const float[:, ::1] d_out):
        """d_out: d loss / d the last forward's outputs, [outputs, rows]; the loss's
        gradients overwrite the arrays of `set_gradients`."""
        cdef int rows = self.rows, stride = self.stride, outputs = self.outputs, layer, r, j
        cdef float* d_here = self.d_out
        cdef float* d_below = self.d_in
        cdef float* swap
        cdef const float* below
        if rows < 0:
            raise RuntimeError("backward needs a forward first")
        if self.gradients is None:
            raise RuntimeError("backward needs set_gradients first")
        if d_out.shape[0] != outputs or d_out.shape[1] != rows:
            raise ValueError(f"d_out must be [{outputs}, {rows}] (the last forward's outputs), got "
                             f"[{d_out.shape[0]}, {d_out.shape[1]}]")
        with nogil:
            for j in range(outputs):
                for r in range(rows):
                    d_here[j * stride + r] = d_out[j, r]
                for r in range(rows, stride):
                    d_here[j * stride + r] = 0.0
            for layer in range(self.layers - 1, -1, -1):
                below = self.inputs_t if layer == 0 else self.hidden[layer - 1]
                mlp_linear_backward(below, stride, self.widths[layer], self.weight[layer], self.widths[layer + 1],
                                    d_here, self.d_weight[layer], self.d_bias[layer], d_below if layer else NULL)
                if layer:
                    mlp_activation_backward(d_below, below, <int64_t>self.widths[layer] * stride, self.activation)
                    swap = d_here
                    d_here = d_below
                    d_below = swap


def _float_array(array, int ndim, str name, bint writable=False):
    if not isinstance(array, np.ndarray) or array.dtype != np.float32 or array.ndim != ndim \
            or not array.flags.c_contiguous or (writable and not array.flags.writeable) or array.size == 0:
        raise TypeError(f"{name} must be a non-empty C-contiguous{' writable' if writable else ''} float32 numpy "
                        f"array of {ndim} dimensions, got {_describe(array)}")
    return array


def _describe(array) -> str:
    if isinstance(array, np.ndarray):
        return f"{array.dtype} {array.ndim}-D ({'' if array.flags.c_contiguous else 'not '}C-contiguous)"
    return type(array).__name__
