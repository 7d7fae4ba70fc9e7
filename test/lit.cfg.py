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
