"""gpuctl: the command line and Python client of the GPU platform.

from gpuctl import Client
client = Client.from_config()          # the profile `gpuctl login` stored, or GPUCTL_URL/TOKEN
job = client.submit({"image": "pytorch:2.4", "gpu_milli": 250, "command": ["python", "train.py"]})
print(client.wait(job.id).status)
"""

from gpuctl.client import Client
from gpuctl.errors import (
    GpuctlError,
    NetworkError,
    NotFoundError,
    RefusedError,
    ServerError,
    UsageError,
    WaitTimeout,
    wait_exit_code,
)
from gpuctl.models import (
    Image,
    Job,
    JobDetail,
    JobEvent,
    LogChunk,
    LogEnd,
    Preemption,
    Quota,
    Task,
    TaskLog,
    Token,
)

__version__ = "0.1.0"

__all__ = [
    "Client",
    "GpuctlError",
    "Image",
    "Job",
    "JobDetail",
    "JobEvent",
    "LogChunk",
    "LogEnd",
    "NetworkError",
    "NotFoundError",
    "Preemption",
    "Quota",
    "RefusedError",
    "ServerError",
    "Task",
    "TaskLog",
    "Token",
    "UsageError",
    "WaitTimeout",
    "wait_exit_code",
]
