"""A long-lived child process that writes runs with the real `mlflow` and `wandb` clients for the tracker
tests: one JSON command per stdin line, one JSON answer per stdout line. Importing mlflow takes seconds
and writes files, so the test process never imports it; one worker serves a whole test session.

Commands (`op`): `mlflow_run` {uri, experiment, name, status, description, params, metrics, tags} →
{run_id, experiment_id}; `mlflow_tag` {uri, run_id, key, value}; `mlflow_end` {uri, run_id, status};
`mlflow_delete` {uri, run_id}; `mlflow_delete_experiment` {uri, experiment};
`mlflow_rename_experiment` {uri, experiment, name}; `wandb_run` {dir, name,
notes, tags, config, metrics, exit_code, project, entity} → {run_id, folder}; `wandb_fields` {fields}
→ the field numbers of wandb's own protobuf messages.
"""

from __future__ import annotations

import json
import sys
import traceback


def mlflow_run(uri, experiment, name, status="FINISHED", description=None, params=None, metrics=None, tags=None):
    import mlflow

    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment(experiment)
    with mlflow.start_run(run_name=name, description=description) as run:
        if params:
            mlflow.log_params(params)
        for key, value, step in metrics or ():
            mlflow.log_metric(key, value, step=step)
        if tags:
            mlflow.set_tags(tags)
        mlflow.end_run(status)
    return {"run_id": run.info.run_id, "experiment_id": run.info.experiment_id}


def client(uri):
    from mlflow import MlflowClient

    return MlflowClient(uri)


def mlflow_tag(uri, run_id, key, value):
    client(uri).set_tag(run_id, key, value)


def mlflow_end(uri, run_id, status):
    client(uri).set_terminated(run_id, status)


def mlflow_delete(uri, run_id):
    client(uri).delete_run(run_id)


def mlflow_delete_experiment(uri, experiment):
    c = client(uri)
    c.delete_experiment(c.get_experiment_by_name(experiment).experiment_id)


def mlflow_rename_experiment(uri, experiment, name):
    c = client(uri)
    c.rename_experiment(c.get_experiment_by_name(experiment).experiment_id, name)


def wandb_run(dir, name, notes=None, tags=(), config=None, metrics=(), exit_code=0, project="soma", entity=None):
    import wandb

    run = wandb.init(project=project, entity=entity, name=name, notes=notes, tags=list(tags), config=config or {}, dir=dir,
                     mode="offline")
    for row in metrics:
        run.log(row)
    folder = run.dir.rsplit("/files", 1)[0]
    run_id = run.id
    run.finish(exit_code=exit_code)
    return {"run_id": run_id, "folder": folder}


def wandb_fields(fields):
    """The field numbers of W&B's own protobuf messages: {"Message.field": number} for each asked."""
    from wandb.proto import wandb_internal_pb2 as pb

    numbers = {}
    for name in fields:
        message, field = name.split(".")
        numbers[name] = getattr(pb, message).DESCRIPTOR.fields_by_name[field].number
    return numbers


def main() -> None:
    ops = {f.__name__: f for f in (mlflow_run, mlflow_tag, mlflow_end, mlflow_delete, mlflow_delete_experiment,
                                   mlflow_rename_experiment, wandb_run, wandb_fields)}
    answers, sys.stdout = sys.stdout, sys.stderr  # the clients print ("View run … at"): keep answers apart
    for line in sys.stdin:
        command = json.loads(line)
        try:
            result = {"ok": ops[command.pop("op")](**command)}
        except Exception:  # noqa: BLE001 - the test sees the traceback
            result = {"error": traceback.format_exc()}
        answers.write(json.dumps(result) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
