# -*- Python -*-
# lit configuration for kvq.

import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "KVQ"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test", ".ptx"]
config.excludes = ["lib", "unittests", "CMakeLists.txt", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kvq_obj_root, "test")

config.substitutions.append(("%specs", os.path.join(config.kvq_src_root, "specs")))

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

tools = [
    ToolSubst("kvq-opt", unresolved="fatal"),
    ToolSubst("kvq-ptx-run", unresolved="ignore"),
]
llvm_config.add_tool_substitutions(tools, [config.kvq_tools_dir, config.llvm_tools_dir])

if config.ptxas and os.path.exists(config.ptxas):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", config.ptxas))

# Host forms run on upstream's JIT runner, with its runtime libraries.
runner_libs = [
    os.path.join(config.llvm_tools_dir, "..", "lib", name)
    for name in ("libmlir_c_runner_utils.so", "libmlir_runner_utils.so")
]
if os.path.exists(os.path.join(config.llvm_tools_dir, "mlir-runner")) and all(
    os.path.exists(lib) for lib in runner_libs
):
    config.available_features.add("mlir-runner")
    config.substitutions.append(("%mlir_runner_libs", ",".join(runner_libs)))

