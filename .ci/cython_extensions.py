"""Print MODULE:PYX:LANGUAGE for each Cython extension CMakeLists.txt builds (the foreach
over ocean envs expanded), for .ci/cross_aarch64.sh --cython."""

import re

text = open("CMakeLists.txt", encoding="utf-8").read()
loops = {body: names.split() for names, body in
         re.findall(r"foreach\(env ([^)]*)\)\s*\n\s*puffercore_cython\(([^)]*)\)", text)}
for call in re.findall(r"^\s*puffercore_cython\(([^)]*)\)", text, re.M):
    module, pyx, *rest = call.split()
    language = "c++" if "CXX" in rest else "c"
    for env in loops.get(call, [""]):
        print(f"{module.replace('${env}', env)}:{pyx.replace('${env}', env)}:{language}")
