"""The workbook on AWS: its package for EMR (:mod:`helpers.deploy.package`) and what runs it there."""
