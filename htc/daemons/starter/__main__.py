"""``python -m htc.daemons.starter JOB_AD EXECUTE_DIR``: run one job (:mod:`htc.daemons.starter.standalone`)."""

from htc.daemons.starter.standalone import main

raise SystemExit(main())
