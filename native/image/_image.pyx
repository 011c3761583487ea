# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Image kernels for env preprocessing (Atari's 84x84 frames), run without the GIL.

`area_resize` applies a separable resize given as taps (see `puffercore.atari.area_taps`):
across the columns first, then down the rows, each output a float32 sum of weighted
input pixels in tap order, rounded half to even. That order and precision are OpenCV's
INTER_AREA, so the bytes equal cv2.resize's (the build keeps the compiler from fusing
the multiply-adds, which would change the last bit of some sums)."""

from libc.math cimport rintf
from libc.stdlib cimport free, malloc
from numpy cimport float32_t, intp_t, uint8_t


def area_resize(const uint8_t[:, ::1] image, uint8_t[:, ::1] out,
                const intp_t[:, ::1] rows, const float32_t[:, ::1] row_weights,
                const intp_t[:, ::1] cols, const float32_t[:, ::1] col_weights):
    """out[i, j] = rint(sum_r row_weights[i, r] * sum_c col_weights[j, c] * image[rows[i, r], cols[j, c]]).

    Shapes: image [H, W]; out [h, w]; rows, row_weights [h, R]; cols, col_weights [w, C];
    every tap index in range (checked: ValueError otherwise)."""
    cdef Py_ssize_t height = image.shape[0], h = out.shape[0], w = out.shape[1]
    cdef Py_ssize_t row_taps = rows.shape[1], col_taps = cols.shape[1]
    if rows.shape[0] != h or cols.shape[0] != w or row_weights.shape[0] != h or col_weights.shape[0] != w \
            or row_weights.shape[1] != row_taps or col_weights.shape[1] != col_taps:
        raise ValueError(f"taps do not fit out {out.shape[0]}x{out.shape[1]}")
    cdef Py_ssize_t tap
    for tap in range(h * row_taps):  # a tap outside the image would read past its end
        if not 0 <= rows[tap // row_taps, tap % row_taps] < height:
            raise ValueError(f"row taps must index the image's {height} rows")
    for tap in range(w * col_taps):
        if not 0 <= cols[tap // col_taps, tap % col_taps] < image.shape[1]:
            raise ValueError(f"column taps must index the image's {image.shape[1]} columns")
    cdef float* across = <float*>malloc(height * w * sizeof(float))
    if across == NULL:
        raise MemoryError()
    cdef Py_ssize_t y, i, j, k
    cdef float total
    with nogil:
        for y in range(height):
            for j in range(w):
                total = image[y, cols[j, 0]] * col_weights[j, 0]
                for k in range(1, col_taps):
                    total = total + image[y, cols[j, k]] * col_weights[j, k]
                across[y * w + j] = total
        for i in range(h):
            for j in range(w):
                total = across[rows[i, 0] * w + j] * row_weights[i, 0]
                for k in range(1, row_taps):
                    total = total + across[rows[i, k] * w + j] * row_weights[i, k]
                out[i, j] = <uint8_t>rintf(total)
    free(across)
