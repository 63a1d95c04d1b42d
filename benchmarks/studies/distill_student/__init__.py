"""Distilling a ``train --members`` ensemble into one student: each way tried, on the
same members.

Every attempt trains a student of one finished ``--members`` run's ensemble (the
product's :func:`inspector.train.members.student_spec` with the members' TrainConfig and
the attempt's changes, trained by :func:`inspector.train.member_run.run_member`, so
resumable) into a folder of its own, then records its figures: the ok bias chosen on the
val split (balanced, and the highest recall at <= 5 % false alarms), the test split's
figures at those biases, AUROC on both, the pixel fraction of the run's own test
evaluation and the CPU minutes of the distillation. Nothing is chosen on the test split.

    python -m benchmarks.studies.distill_student train RUN --name student_x \\
        --steps 24000 --set distill=supervised --set distill_rounds=6
    python -m benchmarks.studies.distill_student record RUN/student_x --label x --note "..."
    python -m benchmarks.studies.distill_student report
"""
