"""IAM checked offline: the AWS calls each function makes, recorded against moto (which checks no
IAM), and the policies its role really gets, read from template.yaml after the SAM transform
(tests/functional/test_iam_contract.py)."""
