"""The processes of a training run and the DeepSpeed engine they share (also the benchmark's).

A lone process sets up a world of one itself; under torchrun or srun the launcher's environment
names the rank. DeepSpeed picks the CUDA accelerator where there is one and the CPU (gloo) else.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import time
from pathlib import Path

import torch

from aiayn.errors import InputError
from aiayn.model import Transformer
from aiayn.precision import native_precision
from aiayn.train.flat_gradients import flatten_bf16_gradients
from aiayn.train.schedule import lr_lambda
from aiayn.train.settings import TrainSettings
from aiayn.train.sync_free import install as install_sync_free_step

log = logging.getLogger(__name__)
# Far longer than a build of DeepSpeed's CPU communication op (about half a minute on 2 cores).
STALE_BUILD_SECONDS = 600


PORT_ATTEMPTS = 5


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def check_launch_variables() -> None:
    """A launcher's RANK, LOCAL_RANK, WORLD_SIZE or LOCAL_WORLD_SIZE left in the shell (or set
    by hand) must describe a world this process can be part of; RANK=1 in a world of one
    waited forever for a rank 0 that never comes."""
    names = ("RANK", "LOCAL_RANK", "WORLD_SIZE")
    local = ("LOCAL_WORLD_SIZE",) if "LOCAL_WORLD_SIZE" in os.environ else ()
    try:
        rank, local_rank, world, *on_this_machine = (int(os.environ[n]) for n in names + local)
    except ValueError:
        found = ", ".join(f"{name}={os.environ[name]!r}" for name in names + local)
        raise InputError(f"the launch variables must be whole numbers: {found}") from None
    if world < 1 or not 0 <= rank < world or not 0 <= local_rank < world:
        raise InputError(
            f"RANK={rank}, LOCAL_RANK={local_rank}, WORLD_SIZE={world} in the environment "
            "describe no process of this run (a rank must be below the world size): left "
            "from another launch? Unset them (`unset RANK LOCAL_RANK WORLD_SIZE`) to train as "
            "one process, or start several with torchrun"
        )
    if on_this_machine and not local_rank < on_this_machine[0] <= world:
        raise InputError(
            f"LOCAL_WORLD_SIZE={on_this_machine[0]} in the environment: the processes on this "
            f"machine must be more than LOCAL_RANK={local_rank} and at most WORLD_SIZE={world}; "
            "left from another launch? Unset it (`unset LOCAL_WORLD_SIZE`)"
        )


def logs_for_the_run() -> bool:
    """Whether this process writes the rule's log: rank 0, or a RANK that is no number, which
    check_launch_variables then refuses in that log."""
    try:
        return int(os.environ.get("RANK", "0")) == 0
    except ValueError:
        return True


# What every launcher of several processes sets (torchrun, DeepSpeed's, a hand-made srun line)
LAUNCH_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def check_world_is_launched() -> None:
    """WORLD_SIZE > 1 left in the shell without the rest of a launch: DeepSpeed would look for
    MPI (a traceback) or, with a MASTER_PORT, wait for processes that never come."""
    world = os.environ.get("WORLD_SIZE", "1")
    missing = [name for name in LAUNCH_VARIABLES if name not in os.environ]
    if world.strip() not in ("", "0", "1") and missing and "TORCHELASTIC_RUN_ID" not in os.environ:
        raise InputError(
            f"WORLD_SIZE={world} in the environment, but no launcher started this process "
            f"({', '.join(missing)} not set): left from another launch? Unset it (`unset "
            "WORLD_SIZE`) to train as one process; for several, set the experiment's "
            "`processes` and the workflow starts them with torchrun"
        )


def init_process() -> tuple[int, int, torch.device]:
    """Rank, world size and device; a lone process sets up a world of one itself."""
    check_world_is_launched()
    for key, value in (
        ("RANK", "0"),
        ("LOCAL_RANK", "0"),
        ("WORLD_SIZE", "1"),
        ("MASTER_ADDR", "127.0.0.1"),
    ):
        os.environ.setdefault(key, value)
    check_launch_variables()
    # torchrun (also as srun starts it, aiayn.train.launch) or another launcher of several
    # processes: their port, as given. A lone process picks its own, whatever MASTER_PORT it
    # inherited (a shell's, or one an earlier in-process start left): two trainings that Snakemake
    # runs side by side would otherwise both listen on it (CI saw EADDRINUSE so).
    launched = "TORCHELASTIC_RUN_ID" in os.environ or int(os.environ["WORLD_SIZE"]) > 1
    os.environ.setdefault("DS_ACCELERATOR", "cuda" if torch.cuda.is_available() else "cpu")
    clear_stale_build_locks()
    import deepspeed
    from deepspeed.accelerator import get_accelerator

    if get_accelerator().device_name() == "cpu":
        skip_shared_memory_op_without_a_compiler(deepspeed)

    for attempt in range(PORT_ATTEMPTS):
        if not launched:
            os.environ["MASTER_PORT"] = str(free_port())
        try:
            deepspeed.init_distributed(verbose=False)
            break
        except torch.distributed.DistNetworkError:
            # Lone processes started together can be handed the same free port (CI saw two
            # trainings fail with EADDRINUSE): a lone one picks another and tries again.
            if launched or attempt == PORT_ATTEMPTS - 1:
                raise
    local_rank = int(os.environ["LOCAL_RANK"])
    accelerator = get_accelerator()
    if accelerator.device_name() == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), device


def clear_stale_build_locks() -> None:
    """On a CPU, DeepSpeed compiles its communication op at the first start (torch's JIT build,
    cached). A start killed during that build leaves torch's lock file behind, and every later
    start would wait for it forever; a lock older than any build is removed, with a warning."""
    from torch.utils.cpp_extension import get_default_build_root

    root = Path(os.environ.get("TORCH_EXTENSIONS_DIR") or get_default_build_root())
    for lock in [*root.glob("deepspeed_*/lock"), *root.glob("*/deepspeed_*/lock")]:
        try:
            age = time.time() - lock.stat().st_mtime
            if age > STALE_BUILD_SECONDS:
                lock.unlink()
                log.warning("removed %s, left by a build killed %.0f s ago", lock, age)
        except FileNotFoundError:  # another process removed it first
            pass


def skip_shared_memory_op_without_a_compiler(deepspeed) -> None:
    """DeepSpeed builds its CPU shared-memory allreduce with torch's JIT build at every start
    (the build is cached, but finding the compiler gone rebuilds it), so without a C++ compiler
    every CPU training died in the build's traceback. Without one, the processes reduce through
    gloo instead (a lone process reduces nothing either way), with a warning."""
    compiler = os.environ.get("CXX") or "c++"
    if shutil.which(compiler) is None:
        deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
        log.warning(
            "no C++ compiler (%s not found): DeepSpeed's shared-memory allreduce is not built, "
            "and the processes reduce through gloo (install g++ or point CXX at one for it)",
            compiler,
        )


PRECISIONS = ("auto", "bf16", "bf16-autocast", "fp16", "fp32")


def resolve_precision(precision: str, device: torch.device) -> tuple[str, str]:
    """bf16, bf16-autocast, fp16 or fp32, and why: auto is what the device computes natively
    (aiayn.precision: bf16 from compute capability 8.0, fp16 on 7.x, else fp32).

    bf16: DeepSpeed's bf16 weights with an fp32 master copy in ZeRO's partitions (its
    BF16_Optimizer). bf16-autocast: fp32 weights and gradients, bf16 matrix products under
    torch.autocast, and torch's fused Adam over all parameters in one kernel. fp16: DeepSpeed's
    fp16 weights, fp32 master weights and dynamic loss scaling (NVIDIA's reference recipe)."""
    if precision not in PRECISIONS:
        raise InputError(
            f"train.precision must be one of {', '.join(PRECISIONS)}, not {precision!r}"
        )
    if precision == "auto":
        chosen, why = native_precision(device)
        return chosen, f"auto: {why}"
    if precision == "fp16" and device.type != "cuda":
        raise InputError(
            f"train.precision fp16 needs a CUDA GPU (this process has the {device.type}, where "
            "DeepSpeed has no fp16): set train.precision: auto or fp32"
        )
    native, why = native_precision(device)
    if precision.startswith("bf16") and native != "bf16" and device.type == "cuda":
        log.warning(
            "train.precision %s on %s: bf16 is emulated there, without tensor cores; auto "
            "would choose %s",
            precision,
            why,
            native,
        )
    return precision, f"as set (train.precision: {precision})"


# DeepSpeed's dynamic loss scale for fp16: start at 2^16, halve at an overflow (the step is
# skipped), double after 1000 steps without one; fairseq's and NVIDIA's defaults alike.
FP16_LOSS_SCALE = {
    "loss_scale": 0,  # dynamic
    "initial_scale_power": 16,
    "loss_scale_window": 1000,
    "hysteresis": 2,
    "min_loss_scale": 1,
}


def precision_config(precision: str) -> dict:
    """The DeepSpeed settings of a resolved precision."""
    if precision == "bf16":
        # Gradients are summed in fp32, over accumulated batches and over processes (DeepSpeed
        # would otherwise sum both in bf16, rounding each addition to 8 bits of mantissa).
        return {"bf16": {"enabled": True}, "data_types": {"grad_accum_dtype": "fp32"}}
    if precision == "fp16":
        return {"bf16": {"enabled": False}, "fp16": {"enabled": True, **FP16_LOSS_SCALE}}
    if precision == "bf16-autocast":
        # No module's gradients are marked for bf16 communication: they stay fp32 everywhere.
        return {
            "bf16": {"enabled": False},
            "torch_autocast": {
                "enabled": True,
                "dtype": "bfloat16",
                "lower_precision_safe_modules": [],
            },
        }
    return {"bf16": {"enabled": False}}


def deepspeed_engine(
    model: Transformer,
    settings: TrainSettings,
    accumulation: int,
    precision: str,
    device: torch.device,
):
    """The model in a DeepSpeed engine with the paper's Adam and schedule (section 5.3)."""
    import deepspeed

    optimizer = torch.optim.Adam(
        model.parameters(),
        lr=1.0,
        eps=float(settings.adam_eps),
        betas=(float(settings.adam_beta1), float(settings.adam_beta2)),  # YAML's 0 is an int
        fused=True,  # one kernel for all parameters: on a CPU too, 5x faster than torch's loop
    )
    schedule = lr_lambda(model.config.d_model, settings.warmup_steps, settings.lr_scale)
    config = {
        "train_micro_batch_size_per_gpu": 1,  # unused: batches are ours, counted in tokens
        "gradient_accumulation_steps": accumulation,
        "zero_optimization": {"stage": settings.zero_stage},
        "zero_allow_untested_optimizer": True,
        **precision_config(precision),  # bf16 with ZeRO 1 is DeepSpeed's BF16_Optimizer
        "communication_data_type": "fp32",
        "gradient_clipping": 0.0,
        "steps_per_print": 1 << 30,
        # DeepSpeed's throughput timer is on by default and waits for the device at every
        # forward and step; ours are measured from the step's own clock (train_record.py).
        "timers": {"throughput": {"enabled": False, "synchronized": False}},
        "wall_clock_breakdown": False,
    }
    engine, *_ = deepspeed.initialize(
        model=model,
        optimizer=optimizer,
        config=config,
        lr_scheduler=lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, schedule),
    )
    if settings.flat_gradients:
        flatten_bf16_gradients(engine.optimizer)
    if settings.sync_free:  # bf16 with ZeRO 1; other optimizers keep the engine's step
        d_model = model.config.d_model
        install_sync_free_step(engine, d_model, settings.warmup_steps, settings.lr_scale)
    return engine


def host_group(world: int, device: torch.device):
    """A gloo group for host values (each step's token counts and votes) where the processes'
    own group runs on GPUs: summed through NCCL, reading them back waits for the device's
    queue at every step. None where there is nothing to gain (one process, or a CPU's gloo)."""
    if world == 1 or device.type != "cuda":
        return None
    return torch.distributed.new_group(backend="gloo")


def sum_over_processes(
    values: list[float], world: int, device: torch.device, group=None
) -> list[float]:
    """Sums over all processes, through `group` on the CPU where one is given; a lone process
    skips the round trip."""
    values = [float(value) for value in values]
    if world == 1:
        return values
    where = device if group is None else torch.device("cpu")
    tensor = torch.tensor(values, dtype=torch.float64, device=where)
    torch.distributed.all_reduce(tensor, group=group)
    return tensor.tolist()


@torch.no_grad()
def ranks_agree(module: torch.nn.Module, world: int, device: torch.device) -> bool:
    """Whether every process holds the same weights, as data parallelism must keep them."""
    if world == 1:
        return True
    digest = torch.zeros(2, dtype=torch.float64, device=device)
    for index, parameter in enumerate(module.parameters(), start=1):
        values = parameter.detach().double()
        digest[0] += values.sum()
        digest[1] += index * values.square().sum()
    gathered = [torch.zeros_like(digest) for _ in range(world)]
    torch.distributed.all_gather(gathered, digest)
    return all(torch.equal(gathered[0], other) for other in gathered[1:])


def compiled_graphs() -> int:
    """Graphs torch.compile built in this process: one per training/evaluation mode and shape
    family; a number that grows with the steps means shapes keep recompiling."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])
