"""Operations artefacts generated from, or checked against, template.yaml: the alarms (one line
each, written into the template) and the dashboard's picture (docs/dashboard.png)."""
