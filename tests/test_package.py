import os

import puffercore


def test_headers_ship_with_the_package():
    include = puffercore.get_include()
    assert os.path.isfile(os.path.join(include, "puffercore", "env.h"))
