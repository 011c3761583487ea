# cython: boundscheck=False, wraparound=False
"""The processes backend's shared words: atomics and cross-process futex waits on a
uint32 array in shared memory (native/vector/shm_sync.h), with the GIL released while
waiting."""

cdef extern from "shm_sync.h":
    unsigned int pc_shm_load(unsigned int* word) nogil
    void pc_shm_store(unsigned int* word, unsigned int value) nogil
    unsigned int pc_shm_add(unsigned int* word, unsigned int value) nogil
    void pc_shm_wake_all(unsigned int* word) nogil
    unsigned int pc_shm_wait_change(unsigned int* word, unsigned int old, long long spin_ns,
                                    long long timeout_ns) nogil


cdef class SharedWords:
    """Atomic access to a uint32 array living in shared memory, with futex waits that
    wake across processes. Indices are checked here so native code never strays."""
    cdef unsigned int[::1] words

    def __init__(self, unsigned int[::1] words):
        self.words = words

    cdef unsigned int* at(self, Py_ssize_t index) except NULL:
        if index < 0 or index >= self.words.shape[0]:
            raise IndexError(f"shared word index {index} out of range [0, {self.words.shape[0]})")
        return &self.words[index]

    def load(self, Py_ssize_t index):
        return pc_shm_load(self.at(index))

    def store(self, Py_ssize_t index, unsigned int value):
        pc_shm_store(self.at(index), value)

    def add(self, Py_ssize_t index, unsigned int value=1):
        return pc_shm_add(self.at(index), value)

    def wake(self, Py_ssize_t index):
        cdef unsigned int* word = self.at(index)
        with nogil:
            pc_shm_wake_all(word)

    def wait_change(self, Py_ssize_t index, unsigned int old, double spin, double timeout):
        """Block (GIL released) until word != old or `timeout` seconds pass, spinning
        for the first `spin` seconds; return the word."""
        cdef unsigned int* word = self.at(index)
        cdef long long timeout_ns = <long long>(timeout * 1e9)
        cdef long long spin_ns = <long long>(spin * 1e9)
        cdef unsigned int value
        with nogil:
            value = pc_shm_wait_change(word, old, spin_ns, timeout_ns)
        return value
