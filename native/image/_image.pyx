# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Image kernels for env preprocessing (Atari's 84x84 frames), run without the GIL.

`area_resize` applies a separable resize given as taps (see `puffercore.atari.area_taps`):
across the columns first, then down the rows, each output a float32 sum of weighted
input pixels in tap order, rounded half to even. That order and precision are OpenCV's
INTER_AREA, so the bytes equal cv2.resize's (the build keeps the compiler from fusing
the multiply-adds, which would change the last bit of some sums)."""

from libc.stdlib cimport free, malloc
from numpy cimport float32_t, intp_t, uint8_t

# 1.5 * 2**23: a float32 sum x in [0, 2**22) plus this has no fraction bits left, so the
# addition rounds x to an integer, to the nearest with ties to even (IEEE's default
# rounding, as rintf and OpenCV's cvRound), and subtracting it back is exact.
cdef float ROUNDING = 12582912.0


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
    # Two passes over raw pointers, each output a float32 sum in tap order (OpenCV's):
    # across: per row, the column taps of each output column (gathers of the row, made
    # float once); down: per output row, tap k of every column at a time, so the inner
    # loop runs over contiguous columns and the compiler vectorizes it.
    cdef Py_ssize_t width = image.shape[1]
    cdef float* across = <float*>malloc((height * w + width + w) * sizeof(float))
    if across == NULL:
        raise MemoryError()
    cdef float* pixels = across + height * w  # one image row as floats
    cdef float* total = pixels + width  # one output row's sums
    cdef const uint8_t* source = &image[0, 0]
    cdef const intp_t* col_index = &cols[0, 0]
    cdef const float32_t* col_weight = &col_weights[0, 0]
    cdef Py_ssize_t y, i, j, k
    cdef float sum_, weight
    cdef const float* tap_row
    cdef uint8_t* out_row
    with nogil:
        for y in range(height):
            for j in range(width):
                pixels[j] = source[y * width + j]
            for j in range(w):
                tap = j * col_taps
                sum_ = pixels[col_index[tap]] * col_weight[tap]
                for k in range(1, col_taps):
                    sum_ = sum_ + pixels[col_index[tap + k]] * col_weight[tap + k]
                across[y * w + j] = sum_
        for i in range(h):
            out_row = &out[i, 0]
            tap_row, weight = across + rows[i, 0] * w, row_weights[i, 0]
            for j in range(w):
                total[j] = tap_row[j] * weight
            for k in range(1, row_taps):
                tap_row, weight = across + rows[i, k] * w, row_weights[i, k]
                for j in range(w):
                    total[j] = total[j] + tap_row[j] * weight
            for j in range(w):  # to the nearest, ties to even (as rintf), in float arithmetic: vectorizes
                out_row[j] = <uint8_t>(<int>((total[j] + ROUNDING) - ROUNDING))
    free(across)
