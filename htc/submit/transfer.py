"""File transfer: ``should_transfer_files``, ``when_to_transfer_output`` and the file lists.

Port of ``SetTransferFiles`` (and the container-image part of it): it validates the
transfer settings against each other, lists input and output files, sizes the input
sandbox (``TransferInputSizeMB``, ``DiskUsage``) and publishes ``FileSystemDomain`` when a
job might run without transferring files.
"""

from __future__ import annotations

from htc.submit.commands import JAVA, strip_quotes
from htc.submit.context import JobContext
from htc.submit.functions import split_list
from htc.submit.resources import parse_bytes

_STF = {"YES": "YES", "NO": "NO", "IF_NEEDED": "IF_NEEDED"}
_FTO = {"ON_EXIT": "ON_EXIT", "ON_EXIT_OR_EVICT": "ON_EXIT_OR_EVICT", "ON_SUCCESS": "ON_SUCCESS",
        "NEVER": "NEVER"}


def _file_list(v: str | None) -> tuple[list[str], bool]:
    if v is None:
        return [], False
    if v == '""':
        return [], True
    items = [f.strip() for f in v.split(",") if f.strip()]
    return items, bool(items)


def set_transfer_files(c: JobContext) -> None:
    """``should_transfer_files``, ``when_to_transfer_output``, the file lists and sizes."""
    inputs, in_given = _file_list(c.param("transfer_input_files", "TransferInput"))
    input_kb = sum(c.measure(f) for f in inputs)
    if c.universe.topping == "container":
        if _container_inputs(c, inputs):
            in_given = True
            input_kb += c.measure(inputs[-1])
    if c.get_value("TransferIn", bool, True):
        stdin = c.get_value("In", str, "")
        if stdin:
            input_kb += c.measure(stdin)
    outputs, out_given = _file_list(c.param("transfer_output_files", "TransferOutput"))
    should = c.param("ShouldTransferFiles", "should_transfer_files")
    key = "should_transfer_files"
    default_should = False
    if should is None:
        should = c.get_value("ShouldTransferFiles", str) or c.s.default_should_transfer_files
        default_should = should is None or c.get_value("ShouldTransferFiles", str) is None
        should = should or "IF_NEEDED"
    stf = _STF.get(should.strip().upper())
    if stf is None:
        raise c.fail(f"invalid value ({should}) for ShouldTransferFiles.  Please either specify "
                     "YES, NO, or IF_NEEDED and try again.", key)
    if stf == "NO" and (in_given or out_given):
        which = ('"transfer_input_files" and "transfer_output_files",' if in_given and out_given
                 else '"transfer_input_files",' if in_given else '"transfer_output_files",')
        raise c.fail(f"you specified files you want Condor to transfer via {which} but you "
                     "disabled should_transfer_files.", key)
    when = c.param("WhenToTransferOutput", "when_to_transfer_output")
    default_when = when is None
    if when is None:
        when = c.get_value("WhenToTransferOutput", str)
        default_when = when is None
    when = when or "ON_EXIT"
    fto = _FTO.get(when.strip().upper())
    if fto is None:
        raise c.fail(f"invalid value ({when}) for WhenToTransferOutput.  Please either specify "
                     "ON_EXIT, or ON_EXIT_OR_EVICT and try again.", "when_to_transfer_output")
    if not default_should and default_when and stf == "NO":
        fto = "NEVER"
    if (stf == "NO") != (fto == "NEVER"):
        raise c.fail(f"WhenToTransferOutput specified as {when} yet ShouldTransferFiles defined "
                     f"as {should}.  Please remove this contradiction from your submit file and "
                     "try again.", "when_to_transfer_output")
    if default_should and fto == "ON_EXIT_OR_EVICT" and stf == "IF_NEEDED":
        stf = "YES"
    if fto == "ON_EXIT_OR_EVICT" and stf == "IF_NEEDED":
        raise c.fail('"when_to_transfer_output = ON_EXIT_OR_EVICT" and "should_transfer_files = '
                     'IF_NEEDED" are incompatible.  Set "should_transfer_files = YES" or '
                     '"when_to_transfer_output = ON_EXIT".', "when_to_transfer_output")
    c.assign_str("ShouldTransferFiles", stf)
    if stf != "NO":
        c.assign_str("WhenToTransferOutput", fto)
    if stf != "YES" and not c.has("FileSystemDomain"):
        c.assign_str("FileSystemDomain", c.s.filesystem_domain)
    if stf != "NO" and c.universe.number == JAVA:
        cmd = c.get_value("Cmd", str, "")
        # the class file and jars are sized and listed, but (as in HTCondor) only an
        # explicit transfer_input_files makes the list appear in the ad
        if cmd and cmd != "java" and cmd not in inputs:
            inputs.append(cmd)
            input_kb += c.measure(cmd)
        for jar in split_list(c.get_value("JarFiles", str, ""), ","):
            inputs.append(jar)
            input_kb += c.measure(jar)
        c.assign_str("Cmd", "java")
        c.assign_bool("TransferExecutable", False)
    du = c.param("disk_usage", "DiskUsage")
    if du is not None:
        kb = parse_bytes(du, 1024)
        if kb is None or kb < 1:
            raise c.fail(f"'{du}' is not valid for disk_usage. It must be >= 1", "disk_usage")
        c.assign_int("DiskUsage", kb)
    else:
        exe_kb = c.get_value("ExecutableSize", int, 0)
        c.assign_int("TransferInputSizeMB", (exe_kb + input_kb + 1023) // 1024)
        c.assign_int("DiskUsage", exe_kb + input_kb)
    if stf != "NO":
        if in_given and inputs:
            c.assign_str("TransferInput", ",".join(inputs))
        if out_given or outputs:
            c.assign_str("TransferOutput", ",".join(outputs))
    elif c.universe.number != JAVA:
        explicit, _ = c.param_bool("transfer_executable", "TransferExecutable", False)
        if explicit:
            raise c.fail("You explicitly requested that the executable be transfered, but for "
                         "this to work, you must enable Condor's file transfer functionality.",
                         "transfer_executable")
    remaps = c.param("transfer_output_remaps", "TransferOutputRemaps")
    if remaps is not None:
        c.assign_str("TransferOutputRemaps", strip_quotes(remaps))


def _container_inputs(c: JobContext, inputs: list[str]) -> bool:
    """``process_container_input_files``: where the container image comes from."""
    image = c.param("container_image", "ContainerImage")
    if not c.get_value("TransferContainer", bool, True):
        c.assign_str("ContainerImageSource", "local")
        return False
    if not image:
        return False
    image = strip_quotes(image)
    for prefix in ("docker://", "oras://"):
        if image.startswith(prefix):
            c.assign_str("ContainerImageSource", prefix[:-3])
            return False
    inputs.append(image)
    base = image.rstrip("/").rsplit("/", 1)[-1]
    c.assign_str("ContainerImageFullPath", image)
    c.assign_str("ContainerImage", base)
    c.assign_str("ContainerImageSource", image.split(":", 1)[0] if ":" in image else "cedar")
    return True
