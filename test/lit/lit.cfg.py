# lit configuration of the moe project: dialect, pass and importer tests.
import os
import lit.formats

config.name = "moe"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.moe_obj_root, "test", "lit")

config.environment["PATH"] = os.pathsep.join(
    [config.moe_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
config.substitutions.append(
    ("%mkckpt", f"{config.python_executable} {config.moe_src_root}/tools/make-tiny-checkpoint.py"))
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%src", config.moe_src_root))
