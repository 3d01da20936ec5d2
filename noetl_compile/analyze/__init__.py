"""Analyses of a loaded playbook: templates, names, data flow and control flow."""
