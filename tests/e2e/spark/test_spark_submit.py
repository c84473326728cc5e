"""`kbus spark-submit` decisions (environment, arguments, shipping kbus); no JVM started."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kbus.cli.commands import app
from kbus.spark import submit
from kbus.spark.submit import (
    AUTOREGISTER_DIR,
    CONF_DIR,
    SubmitError,
    build_kbus_zip,
    find_java,
    is_local_master,
    option_value,
    submit_command,
    submit_environment,
)


def test_environment_points_every_python_process_at_this_interpreter() -> None:
    env = submit_environment({"PATH": "/usr/bin", "SPARK_HOME": "/opt/old-spark", "PYTHONPATH": "/x"}, Path("/p"))
    assert env["SPARK_HOME"] == "/p"
    assert env["PYSPARK_PYTHON"] == env["PYSPARK_DRIVER_PYTHON"] == sys.executable
    assert env["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert env["SPARK_CONF_DIR"] == str(CONF_DIR)
    assert env["PYTHONPATH"].split(":") == [str(AUTOREGISTER_DIR), "/x"]
    assert (CONF_DIR / "spark-defaults.conf").read_text().count("spark.ui.enabled") == 1
    assert (AUTOREGISTER_DIR / "pyspark_kbus.py").is_file()


def test_user_settings_win() -> None:
    user = {"PYSPARK_PYTHON": "/py", "SPARK_CONF_DIR": "/c", "SPARK_LOCAL_IP": "10.0.0.1"}
    env = submit_environment(user, Path("/p"))
    assert (env["PYSPARK_PYTHON"], env["SPARK_CONF_DIR"], env["SPARK_LOCAL_IP"]) == ("/py", "/c", "10.0.0.1")


def test_options_are_read_only_before_the_job_file() -> None:
    args = ["--master", "spark://h:7077", "--conf", "a=b", "--verbose", "job.py", "--master", "local"]
    assert option_value(args, "--master") == "spark://h:7077"
    assert not is_local_master(args, {})
    assert is_local_master(["job.py", "--master", "yarn"], {})
    assert is_local_master(["--master=local[2]", "job.py"], {})


def test_cluster_submit_ships_kbus_and_merges_py_files(tmp_path: Path) -> None:
    z = build_kbus_zip(tmp_path)
    names = zipfile.ZipFile(z).namelist()
    assert "pyspark_kbus.py" in names and "kbus/spark/datasource.py" in names
    assert "kbus/spark/conf/spark-defaults.conf" in names
    cmd = submit_command(Path("/p"), ["--master", "yarn", "job.py", "x"], z)
    assert cmd == ["/p/bin/spark-submit", "--py-files", str(z), "--master", "yarn", "job.py", "x"]
    cmd = submit_command(Path("/p"), ["--py-files", "dep.zip", "job.py"], z)
    assert cmd == ["/p/bin/spark-submit", "--py-files", f"dep.zip,{z}", "job.py"]
    # the driver JVM's own Python runners (planner, streaming source) get it on PYTHONPATH
    env = submit_environment({"PYTHONPATH": "/x"}, Path("/p"), kbus_zip=z)
    assert env["PYTHONPATH"].split(":") == [str(z), str(AUTOREGISTER_DIR), "/x"]


def test_missing_java_is_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(SubmitError, match="openjdk-17"):
        find_java({"PATH": str(tmp_path)})
    with pytest.raises(SubmitError, match="JAVA_HOME"):
        find_java({"JAVA_HOME": str(tmp_path)})


def test_cli_reports_missing_pyspark(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> Path:
        raise SubmitError("pyspark is not installed: pip install 'kbus[spark]'  (pyspark 4.x and pyarrow)")

    monkeypatch.setattr("kbus.cli.spark.pyspark_home", missing)
    result = CliRunner().invoke(app, ["spark-submit", "job.py"])
    assert result.exit_code == 2
    assert "pip install 'kbus[spark]'" in result.output
    assert "Traceback" not in result.output
    assert submit.pyspark_home is not missing


def test_local_jobs_run_through_the_driver_entry() -> None:
    from kbus.spark.submit import DRIVER_ENTRY

    assert submit_command(Path("/p"), ["--master", "local[2]", "job.py", "--x"]) == [
        "/p/bin/spark-submit", "--master", "local[2]", str(DRIVER_ENTRY), "job.py", "--x"]
    # a jar, or no job at all (spark-submit --version), is left alone
    assert submit_command(Path("/p"), ["app.jar"]) == ["/p/bin/spark-submit", "app.jar"]
    assert submit_command(Path("/p"), ["--version"]) == ["/p/bin/spark-submit", "--version"]


def test_driver_finds_the_connection_failure_in_wrapped_errors() -> None:
    from kbus.spark.driver import connection_failure

    worker_trace = (
        "[PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance: Traceback (most recent call last):\n"
        '  File "datasource.py", line 233, in schema\n'
        "kbus.spark.metadata.KbusConnectionError: kbus: Could not connect to any broker (h:1: Connection refused)\n"
        " SQLSTATE: 38000"
    )
    try:
        try:
            raise RuntimeError(worker_trace)
        except RuntimeError as inner:
            raise ValueError("wrapped") from inner
    except ValueError as exc:
        assert connection_failure(exc) == "kbus: Could not connect to any broker (h:1: Connection refused)"
    assert connection_failure(RuntimeError("something else")) is None
